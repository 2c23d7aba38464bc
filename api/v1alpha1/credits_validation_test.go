//go:build !unit

package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestCreditsValidation: valid credits are stored with UTC as their zone when none is given;
// each bad one is refused with a message naming the field and what is wanted.
func TestCreditsValidation(t *testing.T) {
	ns := env.Namespace(t, "credits")
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plan"},
		Spec: switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 100_000, Refill: switchboardv1alpha1.CreditsMonthly, DayOfMonth: 31}}}
	if err := env.Client.Create(ctx(t), key); err != nil {
		t.Fatalf("creating a key with credits: %v", err)
	}
	var got switchboardv1alpha1.APIKey
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(key), &got); err != nil {
		t.Fatal(err)
	}
	if c := got.Spec.Credits; c == nil || c.Amount != 100_000 || c.Refill != switchboardv1alpha1.CreditsMonthly || c.DayOfMonth != 31 || c.TimeZone != "UTC" {
		t.Fatalf("the credits did not round-trip with UTC: %+v", c)
	}

	credits := func(amount int64, refill switchboardv1alpha1.CreditsRefill, zone string, weekday switchboardv1alpha1.Weekday, day int32) switchboardv1alpha1.APIKeySpec {
		return switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{Amount: amount, Refill: refill, TimeZone: zone, Weekday: weekday, DayOfMonth: day}}
	}
	tests := []struct {
		name   string
		spec   switchboardv1alpha1.APIKeySpec
		errors []string
	}{
		{"no credits", credits(0, "Daily", "", "", 0), []string{"spec.credits.amount", "greater than or equal to 1"}},
		{"over 2^40", credits(1<<40+1, "Daily", "", "", 0), []string{"spec.credits.amount", "less than or equal to 1099511627776"}},
		{"no refill", credits(10, "", "", "", 0), []string{"spec.credits.refill", "Unsupported value"}},
		{"a yearly refill", credits(10, "Yearly", "", "", 0), []string{"spec.credits.refill", "Unsupported value"}},
		{"a zone of the wrong shape", credits(10, "Daily", "Europe/Paris; rm", "", 0), []string{"spec.credits.timeZone", "should match"}},
		{"a weekday on a monthly refill", credits(10, "Monthly", "", "Friday", 0), []string{"spec.credits", "credits.weekday is only for refill: Weekly"}},
		{"a day of the month on a weekly refill", credits(10, "Weekly", "", "", 15), []string{"spec.credits", "credits.dayOfMonth is only for refill: Monthly"}},
		{"the 32nd", credits(10, "Monthly", "", "", 32), []string{"spec.credits.dayOfMonth", "less than or equal to 31"}},
		{"a day that is not one", credits(10, "Weekly", "", "Funday", 0), []string{"spec.credits.weekday", "Unsupported value"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)}, Spec: tt.spec}
			err := env.Client.Create(ctx(t), key)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, want := range tt.errors {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestCreditsRolloverGrantsAndIntervalValidation: rollover, cap, grants and interval are stored
// when valid (Reset by default), and each bad combination is refused with a message naming it.
func TestCreditsRolloverGrantsAndIntervalValidation(t *testing.T) {
	ns := env.Namespace(t, "credits-more")
	capOf := func(n int64) *int64 { return &n }
	hours := func(h time.Duration) *metav1.Duration { return &metav1.Duration{Duration: h * time.Hour} }
	expires := metav1.NewTime(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	good := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plan"},
		Spec: switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 100, Refill: switchboardv1alpha1.CreditsInterval,
			Interval: hours(720), Rollover: switchboardv1alpha1.CreditsAdd, Cap: capOf(300),
			Grants: []switchboardv1alpha1.CreditGrant{{ID: "launch-2026", Amount: 1000, ExpiresAt: &expires}, {ID: "apology", Amount: 5}}}}}
	if err := env.Client.Create(ctx(t), good); err != nil {
		t.Fatalf("creating a key with rollover, grants and an interval: %v", err)
	}
	reset := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reset"},
		Spec: switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 100, Refill: switchboardv1alpha1.CreditsDaily}}}
	if err := env.Client.Create(ctx(t), reset); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(reset), reset); err != nil || reset.Spec.Credits.Rollover != switchboardv1alpha1.CreditsReset {
		t.Errorf("the default rollover: %q (%v), want Reset", reset.Spec.Credits.Rollover, err)
	}

	grants := func(g ...switchboardv1alpha1.CreditGrant) *switchboardv1alpha1.APIKeyCredits {
		return &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Grants: g}
	}
	var nine []switchboardv1alpha1.CreditGrant
	for i := range 9 {
		nine = append(nine, switchboardv1alpha1.CreditGrant{ID: fmt.Sprintf("g%d", i), Amount: 1})
	}
	tests := []struct {
		name    string
		credits *switchboardv1alpha1.APIKeyCredits
		errors  []string
	}{
		{"Add without a cap", &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Rollover: "Add"}, []string{"credits.cap is required with rollover: Add"}},
		{"a cap with Reset", &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Cap: capOf(20)}, []string{"credits.cap is required with rollover: Add, and only with it"}},
		{"a cap under the amount", &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Rollover: "Add", Cap: capOf(5)}, []string{"credits.cap must be at least credits.amount"}},
		{"a cap over 2^40", &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Rollover: "Add", Cap: capOf(1<<40 + 1)}, []string{"spec.credits.cap", "less than or equal to 1099511627776"}},
		{"a rollover that is not one", &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Rollover: "Keep"}, []string{"spec.credits.rollover", "Unsupported value"}},
		{"Interval without an interval", &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Interval"}, []string{"credits.interval is required with refill: Interval"}},
		{"an interval on a daily refill", &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Interval: hours(24)}, []string{"credits.interval is required with refill: Interval, and only with it"}},
		{"an interval too short", &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Interval", Interval: &metav1.Duration{Duration: 30 * time.Second}}, []string{"credits.interval is from 1m to 8784h"}},
		{"an interval over a leap year", &switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Interval", Interval: hours(8785)}, []string{"credits.interval is from 1m to 8784h"}},
		{"nine grants", grants(nine...), []string{"spec.credits.grants", "must have at most 8 items"}},
		{"a grant twice", grants(switchboardv1alpha1.CreditGrant{ID: "a", Amount: 1}, switchboardv1alpha1.CreditGrant{ID: "a", Amount: 2}), []string{"spec.credits.grants[1]", "Duplicate value"}},
		{"a grant of nothing", grants(switchboardv1alpha1.CreditGrant{ID: "a", Amount: 0}), []string{"spec.credits.grants[0].amount", "greater than or equal to 1"}},
		{"a grant id of the wrong shape", grants(switchboardv1alpha1.CreditGrant{ID: "Launch_2026", Amount: 1}), []string{"spec.credits.grants[0].id", "should match"}},
		{"a grant id too long", grants(switchboardv1alpha1.CreditGrant{ID: strings.Repeat("a", 64), Amount: 1}), []string{"spec.credits.grants[0].id", "may not be more than 63"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)},
				Spec: switchboardv1alpha1.APIKeySpec{Credits: tt.credits}}
			err := env.Client.Create(ctx(t), key)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, want := range tt.errors {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
