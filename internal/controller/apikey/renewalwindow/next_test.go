package renewalwindow

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func TestNext(t *testing.T) {
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
		{"cron: the first of the month", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 1 1 * *", 4*time.Hour, "Europe/Paris")}, wed10,
			time.Date(2026, 12, 1, 1, 0, 0, 0, paris)},
		{"cron: inside a weekday window", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("30 9 * * 1-5", time.Hour, "Europe/Paris")}, wed10, wed10},
		{"cron: weekdays only, from Saturday", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 2 * * 1-5", time.Hour, "Europe/Paris")},
			time.Date(2026, 11, 28, 10, 0, 0, 0, paris), time.Date(2026, 11, 30, 2, 0, 0, 0, paris)},
		{"cron beside a weekly window: the sooner", []switchboardv1alpha1.APIKeyRenewalWindow{
			w([]switchboardv1alpha1.Weekday{"Monday"}, "02:00", time.Hour, "Europe/Paris"), cronW("0 20 * * *", time.Hour, "UTC")}, wed10,
			time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Next(tt.windows, tt.at)
			if !ok || !got.Equal(tt.want) {
				t.Errorf("Next = %s, %v; want %s", got, ok, tt.want)
			}
		})
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
