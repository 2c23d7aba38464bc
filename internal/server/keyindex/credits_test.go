package keyindex

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

func TestCredits(t *testing.T) {
	hour := &switchboardv1alpha1.APIKeyRateLimit{Requests: 10, Period: metav1.Duration{Duration: time.Hour}}
	tests := []struct {
		name      string
		rateLimit *switchboardv1alpha1.APIKeyRateLimit
		credits   switchboardv1alpha1.APIKeyCredits
		want      ratelimit.Schedule
		wantRate  bool
		wantError string
	}{
		{"monthly on the 31st in Berlin, beside a rate", hour,
			switchboardv1alpha1.APIKeyCredits{Amount: 3, Refill: switchboardv1alpha1.CreditsMonthly, TimeZone: "Europe/Berlin", DayOfMonth: 31},
			ratelimit.Schedule{Refill: ratelimit.Monthly, Day: 31, Weekday: time.Monday}, true, ""},
		{"weekly on Friday, credits alone", nil,
			switchboardv1alpha1.APIKeyCredits{Amount: 3, Refill: switchboardv1alpha1.CreditsWeekly, Weekday: "Friday"},
			ratelimit.Schedule{Refill: ratelimit.Weekly, Day: 1, Weekday: time.Friday}, false, ""},
		{"a zone past the schema is UTC, monthly", nil,
			switchboardv1alpha1.APIKeyCredits{Amount: 3, Refill: switchboardv1alpha1.CreditsDaily, TimeZone: "Mars/Olympus"},
			ratelimit.Schedule{Refill: ratelimit.Monthly, Day: 1, Weekday: time.Monday}, false, `credits: time zone "Mars/Olympus"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New()
			err := putAPIKey(x, apiKey("uid-1", func(k *switchboardv1alpha1.APIKey) {
				k.Spec.RateLimit, k.Spec.Credits = tt.rateLimit, &tt.credits
			}))
			if tt.wantError == "" && err != nil || tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError)) {
				t.Errorf("putAPIKey error %v, want %q", err, tt.wantError)
			}
			p := x.Keys()[0].RateLimit
			if p == nil || p.Credits == nil {
				t.Fatalf("policy %+v, want credits", p)
			}
			got := p.Credits.Schedule
			if p.Credits.Amount != 3 || got.Refill != tt.want.Refill || got.Day != tt.want.Day || got.Weekday != tt.want.Weekday || p.HasRate() != tt.wantRate {
				t.Errorf("credits %+v, rate %v; want 3 on %+v, rate %v", *p.Credits, p.HasRate(), tt.want, tt.wantRate)
			}
			if zone := wantZone(tt.credits.TimeZone, tt.wantError); got.Zone.String() != zone {
				t.Errorf("zone %s, want %s", got.Zone, zone)
			}
		})
	}
}

// wantZone is the zone a spec's timeZone is counted in: UTC when absent or unreadable.
func wantZone(zone, wantError string) string {
	if zone == "" || wantError != "" {
		return "UTC"
	}
	return zone
}

// TestCreditsOfSpec: rollover, cap, interval and grants reach the limiter's credits, under the
// counter given; what the CRD would refuse errs on the side of less, with an error.
func TestCreditsOfSpec(t *testing.T) {
	capOf := func(n int64) *int64 { return &n }
	expires := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name      string
		spec      switchboardv1alpha1.APIKeyCredits
		check     func(c ratelimit.Credits) bool
		wantError string
	}{
		{"rollover Add with a cap", switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Rollover: "Add", Cap: capOf(25)},
			func(c ratelimit.Credits) bool { return c.Cap == 25 && c.Counter == "pool-or-uid" }, ""},
		{"a cap with Reset is no rollover", switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Rollover: "Reset", Cap: capOf(25)},
			func(c ratelimit.Credits) bool { return c.Cap == 0 }, ""},
		{"a cap under the amount is the amount", switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Rollover: "Add", Cap: capOf(3)},
			func(c ratelimit.Credits) bool { return c.Cap == 10 }, ""},
		{"every 90 minutes", switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Interval", Interval: &metav1.Duration{Duration: 90 * time.Minute}},
			func(c ratelimit.Credits) bool {
				return c.Schedule.Refill == ratelimit.Interval && c.Schedule.Every == 90*time.Minute
			}, ""},
		{"an interval too short is monthly", switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Interval", Interval: &metav1.Duration{Duration: time.Second}},
			func(c ratelimit.Credits) bool { return c.Schedule.Refill == ratelimit.Monthly }, "refilling them monthly in UTC"},
		{"grants", switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Grants: []switchboardv1alpha1.CreditGrant{
			{ID: "launch", Amount: 500, ExpiresAt: &expires}, {ID: "apology", Amount: 20}}},
			func(c ratelimit.Credits) bool {
				return len(c.Grants) == 2 && c.Grants[0].ExpiresAt.Equal(expires.Time) && c.Grants[1].ExpiresAt.IsZero()
			}, ""},
		{"a grant twice is once", switchboardv1alpha1.APIKeyCredits{Amount: 10, Refill: "Daily", Grants: []switchboardv1alpha1.CreditGrant{
			{ID: "launch", Amount: 500}, {ID: "launch", Amount: 500}}},
			func(c ratelimit.Credits) bool { return len(c.Grants) == 1 }, `grant "launch" left out`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Credits(&tt.spec, "pool-or-uid")
			if tt.wantError == "" && err != nil || tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError)) {
				t.Errorf("error %v, want %q", err, tt.wantError)
			}
			if !tt.check(c) {
				t.Errorf("credits %+v", c)
			}
			if _, err := ratelimit.NewCreditPolicy("uid", ratelimit.Limit{}, c); err != nil {
				t.Errorf("the limiter refuses them: %v", err)
			}
		})
	}
}
