package renewalinterval

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func lifecycle(lifetime, before time.Duration, pct int32) *switchboardv1alpha1.APIKeyLifecycle {
	lc := &switchboardv1alpha1.APIKeyLifecycle{}
	if lifetime > 0 {
		lc.Lifetime = &metav1.Duration{Duration: lifetime}
	}
	if before > 0 {
		lc.RenewBefore = &metav1.Duration{Duration: before}
	}
	if pct > 0 {
		lc.RenewBeforePercentage = ptr.To(pct)
	}
	return lc
}

// TestOf: the larger of the floor and the percentage of the lifetime; a part at zero or below
// bounds nothing.
func TestOf(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name     string
		m        Minimum
		lifetime time.Duration
		want     time.Duration
	}{
		{"the floor holds a short lifetime", Default, 20 * time.Minute, 5 * time.Minute},
		{"10% holds a long one", Default, 90 * day, 9 * day},
		{"exactly at the crossover", Default, 50 * time.Minute, 5 * time.Minute},
		{"the longest lifetime does not overflow", Minimum{Percentage: 99}, 87600 * time.Hour, 86724 * time.Hour},
		{"a floor alone", Minimum{Floor: 10 * time.Second}, 90 * day, 10 * time.Second},
		{"a percentage alone", Minimum{Floor: -1, Percentage: 10}, 3 * time.Minute, 18 * time.Second},
		{"none", Minimum{Floor: -1, Percentage: -1}, 90 * day, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Of(tt.lifetime); got != tt.want {
				t.Fatalf("Of(%s) = %s, want %s", tt.lifetime, got, tt.want)
			}
		})
	}
}

// TestInterval: what a lifecycle yields between two renewals.
func TestInterval(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name string
		lc   *switchboardv1alpha1.APIKeyLifecycle
		want time.Duration
	}{
		{"renewBefore", lifecycle(30*day, 7*day, 0), 23 * day},
		{"a percentage", lifecycle(2*time.Minute, 0, 99), 1200 * time.Millisecond},
		{"a percentage of the longest lifetime", lifecycle(87600*time.Hour, 0, 99), 876 * time.Hour},
		{"a lifetime alone renews nothing", lifecycle(30*day, 0, 0), 0},
		{"nothing at all", lifecycle(0, 0, 0), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Interval(tt.lc); got != tt.want {
				t.Fatalf("Interval = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestCheck: a lifecycle renewing more often than the minimum is named with its numbers; one
// at the minimum or above, or renewing nothing, passes.
func TestCheck(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name string
		m    Minimum
		lc   *switchboardv1alpha1.APIKeyLifecycle
		want string
	}{
		{"the storm of issue 29", Default, lifecycle(2*time.Minute, 0, 99),
			"lifetime 2m0s with renewBeforePercentage 99 (1m58.8s) renews the key every 1.2s; this platform renews a key at most every 5m0s (the larger of 5m0s and 10% of the lifetime)"},
		{"under 10% of a long lifetime", Default, lifecycle(90*day, 85*day, 0),
			"lifetime 2160h0m0s with renewBefore 2040h0m0s renews the key every 120h0m0s; this platform renews a key at most every 216h0m0s (the larger of 5m0s and 10% of the lifetime)"},
		{"exactly the minimum", Default, lifecycle(10*time.Minute, 5*time.Minute, 0), ""},
		{"a usual lifecycle", Default, lifecycle(30*day, 7*day, 0), ""},
		{"a revealed key's lifetime alone", Default, lifecycle(2*time.Minute, 0, 0), ""},
		{"a floor alone", Minimum{Floor: 20 * time.Second}, lifecycle(3*time.Minute, 170*time.Second, 0),
			"lifetime 3m0s with renewBefore 2m50s renews the key every 10s; this platform renews a key at most every 20s (20s)"},
		{"the cluster suite's renewal test under its own minimum", Minimum{Floor: 20 * time.Second, Percentage: 10}, lifecycle(3*time.Minute, 150*time.Second, 0), ""},
		{"no minimum", Minimum{Floor: -1, Percentage: -1}, lifecycle(2*time.Minute, 0, 99), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Check(tt.lc); got != tt.want {
				t.Fatalf("Check:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
