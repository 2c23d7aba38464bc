//go:build !unit

package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"

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
