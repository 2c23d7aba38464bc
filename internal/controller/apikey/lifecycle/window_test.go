package lifecycle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestRenewalWaitsForItsWindow: a due renewal waits for the next window, and the status's
// renewalTime says when.
func TestRenewalWaitsForItsWindow(t *testing.T) {
	key := planKeyObj(2, false)
	key.Spec.SecretName = "app-key"
	key.Spec.Lifetime = &metav1.Duration{Duration: 30 * 24 * time.Hour}
	key.Spec.RenewBefore = &metav1.Duration{Duration: 7 * 24 * time.Hour}
	key.Spec.RenewalWindows = []switchboardv1alpha1.APIKeyRenewalWindow{{Days: []switchboardv1alpha1.Weekday{"Saturday"}, Start: "03:00",
		Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "UTC"}}
	// The key ends Thursday 2026-12-10 12:00 UTC; renewBefore puts the renewal at Thursday
	// 2026-12-03 12:00, and the first window from then is Saturday 2026-12-05 03:00.
	notAfter := time.Date(2026, 12, 10, 12, 0, 0, 0, time.UTC)
	issued := notAfter.Add(-30 * 24 * time.Hour)
	want := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	if got, limited := RenewalTime(key, issued, notAfter, time.Time{}); !got.Equal(want) || limited {
		t.Fatalf("RenewalTime = %s (limited %v), want %s", got, limited, want)
	}
	// Held back by the platform's minimum interval to Saturday 13:00, the renewal waits for the
	// next window from then: Saturday 12-12 03:00, after the end (a lifetime no longer than
	// that minimum is renewed after its end rather than never).
	if got, limited := RenewalTime(key, issued, notAfter, time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC)); !got.Equal(want.Add(7*24*time.Hour)) || !limited {
		t.Fatalf("RenewalTime after the minimum = %s (limited %v), want %s", got, limited, want.Add(7*24*time.Hour))
	}
	// Two days ahead is Tuesday 12-08; the first Friday window, 12-11, is after the end (a
	// configuration the API server refuses; the operator never renews past the end anyway).
	key.Spec.RenewBefore = &metav1.Duration{Duration: 2 * 24 * time.Hour}
	key.Spec.RenewalWindows[0].Days = []switchboardv1alpha1.Weekday{"Friday"}
	if got, _ := RenewalTime(key, issued, notAfter, time.Time{}); !got.IsZero() {
		t.Fatalf("a window after the end gave renewalTime %s", got)
	}
}
