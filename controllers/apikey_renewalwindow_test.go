package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func TestFirstOpenAt(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	w := func(days []switchboardv1alpha1.Weekday, start string, d time.Duration, tz string) switchboardv1alpha1.APIKeyRenewalWindow {
		return switchboardv1alpha1.APIKeyRenewalWindow{Days: days, Start: start, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
	}
	// Wednesday 2026-11-25 10:00 in Paris (09:00 UTC).
	wed10 := time.Date(2026, 11, 25, 10, 0, 0, 0, paris)
	tests := []struct {
		name    string
		windows []switchboardv1alpha1.APIKeyRenewalWindow
		at      time.Time
		want    time.Time
	}{
		{"no windows: at once", nil, wed10, wed10},
		{"inside a daily window: at once", []switchboardv1alpha1.APIKeyRenewalWindow{w(nil, "09:00", 2*time.Hour, "Europe/Paris")}, wed10, wed10},
		{"before today's window: when it opens", []switchboardv1alpha1.APIKeyRenewalWindow{w(nil, "22:00", time.Hour, "Europe/Paris")}, wed10,
			time.Date(2026, 11, 25, 22, 0, 0, 0, paris)},
		{"after today's window: tomorrow's", []switchboardv1alpha1.APIKeyRenewalWindow{w(nil, "02:00", time.Hour, "Europe/Paris")}, wed10,
			time.Date(2026, 11, 26, 2, 0, 0, 0, paris)},
		{"Mondays only: next Monday", []switchboardv1alpha1.APIKeyRenewalWindow{w([]switchboardv1alpha1.Weekday{"Monday"}, "02:00", time.Hour, "Europe/Paris")}, wed10,
			time.Date(2026, 11, 30, 2, 0, 0, 0, paris)},
		{"a window open since last night", []switchboardv1alpha1.APIKeyRenewalWindow{w(nil, "23:00", 12*time.Hour, "Europe/Paris")}, wed10, wed10},
		{"the sooner of two", []switchboardv1alpha1.APIKeyRenewalWindow{
			w([]switchboardv1alpha1.Weekday{"Friday"}, "02:00", time.Hour, "Europe/Paris"),
			w([]switchboardv1alpha1.Weekday{"Thursday"}, "02:00", time.Hour, "America/New_York")}, wed10,
			time.Date(2026, 11, 26, 2, 0, 0, 0, mustZone(t, "America/New_York"))},
		{"UTC when no zone is named", []switchboardv1alpha1.APIKeyRenewalWindow{w(nil, "12:00", time.Hour, "")}, wed10,
			time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)},
		{"cron: the first of the month", []switchboardv1alpha1.APIKeyRenewalWindow{cronWindow("0 1 1 * *", 4*time.Hour, "Europe/Paris")}, wed10,
			time.Date(2026, 12, 1, 1, 0, 0, 0, paris)},
		{"cron: inside a weekday window", []switchboardv1alpha1.APIKeyRenewalWindow{cronWindow("30 9 * * 1-5", time.Hour, "Europe/Paris")}, wed10, wed10},
		{"cron: weekdays only, from Saturday", []switchboardv1alpha1.APIKeyRenewalWindow{cronWindow("0 2 * * 1-5", time.Hour, "Europe/Paris")},
			time.Date(2026, 11, 28, 10, 0, 0, 0, paris), time.Date(2026, 11, 30, 2, 0, 0, 0, paris)},
		{"cron beside a weekly window: the sooner", []switchboardv1alpha1.APIKeyRenewalWindow{
			w([]switchboardv1alpha1.Weekday{"Monday"}, "02:00", time.Hour, "Europe/Paris"), cronWindow("0 20 * * *", time.Hour, "UTC")}, wed10,
			time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := firstOpenAt(tt.windows, tt.at)
			if !ok || !got.Equal(tt.want) {
				t.Errorf("firstOpenAt = %s, %v; want %s", got, ok, tt.want)
			}
		})
	}
}

func cronWindow(spec string, d time.Duration, tz string) switchboardv1alpha1.APIKeyRenewalWindow {
	return switchboardv1alpha1.APIKeyRenewalWindow{Cron: spec, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

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
	if got := renewalTime(key, issued, notAfter); !got.Equal(want) {
		t.Fatalf("renewalTime = %s, want %s", got, want)
	}
	// Two days ahead is Tuesday 12-08; the first Friday window, 12-11, is after the end (a
	// configuration the API server refuses; the operator never renews past the end anyway).
	key.Spec.RenewBefore = &metav1.Duration{Duration: 2 * 24 * time.Hour}
	key.Spec.RenewalWindows[0].Days = []switchboardv1alpha1.Weekday{"Friday"}
	if got := renewalTime(key, issued, notAfter); !got.IsZero() {
		t.Fatalf("a window after the end gave renewalTime %s", got)
	}
}
