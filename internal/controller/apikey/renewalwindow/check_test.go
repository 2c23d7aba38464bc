package renewalwindow

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func cronW(spec string, d time.Duration, tz string) switchboardv1alpha1.APIKeyRenewalWindow {
	return switchboardv1alpha1.APIKeyRenewalWindow{Cron: spec, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

func weekly(days []switchboardv1alpha1.Weekday, start string, d time.Duration, tz string) switchboardv1alpha1.APIKeyRenewalWindow {
	return switchboardv1alpha1.APIKeyRenewalWindow{Days: days, Start: start, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

func eight(w switchboardv1alpha1.APIKeyRenewalWindow) []switchboardv1alpha1.APIKeyRenewalWindow {
	out := make([]switchboardv1alpha1.APIKeyRenewalWindow, 8)
	for i := range out {
		out[i] = w
	}
	return out
}

func TestCheck(t *testing.T) {
	from := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	tests := []struct {
		name    string
		windows []switchboardv1alpha1.APIKeyRenewalWindow
		period  time.Duration
		want    string // a fragment of the refusal; "" for accepted
	}{
		{"no windows", nil, time.Hour, ""},
		{"cert-manager#9146: daily 1m window, 1h renewal period", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 0 * * *", time.Minute, "UTC")}, time.Hour, "no renewal window opens between"},
		{"daily 1m window, 24h period", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 0 * * *", time.Minute, "UTC")}, day, ""},
		{"daily 1m window, just under 24h", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 0 * * *", time.Minute, "UTC")}, day - 2*time.Minute, "no renewal window"},
		{"weekdays: the weekend is too long for 2 days", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 2 * * 1-5", time.Hour, "Europe/Paris")}, 2 * day, "2 days 23h"},
		// Friday's window closes at 01:00 UTC in summer time, Monday's opens at 01:00 UTC in
		// winter time: the weekend the clocks go back is 3 days to the minute.
		{"weekdays: 3 days, but the clocks go back", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 2 * * 1-5", time.Hour, "Europe/Paris")}, 3 * day, "(3 days)"},
		{"weekdays: 3 days and a minute", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 2 * * 1-5", time.Hour, "Europe/Paris")}, 3*day + time.Minute, ""},
		{"monthly: 30 days is not enough after a 31-day month", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 1 1 * *", 4*time.Hour, "UTC")}, 30 * day, "no renewal window"},
		{"monthly: 31 days is", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 1 1 * *", 4*time.Hour, "UTC")}, 31 * day, ""},
		{"a date that never comes", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 0 30 2 *", time.Hour, "UTC")}, 400 * day, "never opens"},
		{"yearly, long period", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 0 1 1 *", 24*time.Hour, "UTC")}, 366 * day, ""},
		{"yearly, shorter period", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 0 1 1 *", 24*time.Hour, "UTC")}, 300 * day, "no renewal window"},
		{"two windows together cover what neither does", []switchboardv1alpha1.APIKeyRenewalWindow{
			cronW("0 2 * * 1-5", time.Hour, "UTC"), weekly([]switchboardv1alpha1.Weekday{"Saturday", "Sunday"}, "02:00", time.Hour, "UTC")}, day, ""},
		{"weekly and cron, a gap left", []switchboardv1alpha1.APIKeyRenewalWindow{
			cronW("0 2 * * 1-5", time.Hour, "UTC"), weekly([]switchboardv1alpha1.Weekday{"Sunday"}, "02:00", time.Hour, "UTC")}, day, "no renewal window"},
		// 02:30 does not exist in Paris the night the clocks go forward: that day has no window.
		{"daily at a time daylight saving skips", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("30 2 * * *", time.Hour, "Europe/Paris")}, day, "2027-03-27T02:30:00Z"},
		// 03:30 always exists, but the night the clocks go back puts 24 hours between two.
		{"daily at a time that always exists, 24h", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("30 3 * * *", time.Hour, "Europe/Paris")}, day, "(24h)"},
		{"daily at a time that always exists, 24h1m", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("30 3 * * *", time.Hour, "Europe/Paris")}, day + time.Minute, ""},
		{"unknown zone", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 2 * * *", time.Hour, "Mars/Olympus")}, day, "unknown time zone"},
		{"bad expression", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 25 * * *", time.Hour, "UTC")}, day, "cron"},
		{"open nearly always: too many openings", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("* * * * *", time.Minute, "UTC")}, time.Hour, "too often"},
		{"eight windows every 2 minutes: the lookups are bounded for all of them", eight(cronW("*/2 * * * *", time.Minute, "Europe/Paris")), time.Hour, "too often"},
		{"every 15 minutes for 15: checked", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("*/15 * * * *", 15*time.Minute, "UTC")}, time.Hour, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			got := Check(tt.windows, tt.period, from)
			if took := time.Since(start); took > 5*time.Second {
				t.Logf("took %s", took)
			}
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("Check = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCheckAgreesWithNext: whenever Check accepts, a renewal due at any instant of the year
// finds an open window (Next) within the period; sampled every 7 minutes.
func TestCheckAgreesWithNext(t *testing.T) {
	from := time.Date(2026, 3, 20, 0, 0, 0, 0, time.UTC)
	windows := []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 2 * * 1-5", time.Hour, "Europe/Paris"), weekly([]switchboardv1alpha1.Weekday{"Saturday"}, "12:00", 2*time.Hour, "America/New_York")}
	period := 42 * time.Hour
	if msg := Check(windows, period, from); msg != "" {
		t.Fatalf("Check refused: %s", msg)
	}
	for at := from; at.Before(from.Add(checkSpan)); at = at.Add(7 * time.Minute) {
		open, ok := Next(windows, at)
		if !ok || open.Sub(at) >= period {
			t.Fatalf("a renewal due %s finds a window at %s (%v), not within %s", at, open, ok, period)
		}
	}
	// The longest gap is from Friday's window (closing 03:00 in Paris) to Saturday's (opening
	// 12:00 in New York): 39 hours when both keep the same kind of time.
	if msg := Check(windows, 39*time.Hour, from); !strings.Contains(msg, "(39h)") {
		t.Fatalf("Check with 39h: %q, want the 39h gap from Friday to Saturday", msg)
	}
}

// TestCheckIsTheSameOnEveryDay: whether windows are refused does not depend on the day the
// webhook checks them. Check starts inside some gap, cut short at from; the whole gap must
// still be found when it comes round again, which for a daylight saving night is up to 53
// weeks later (a span of one year admitted these on the two days before 2026-10-25 01:00
// UTC). from runs every 29 hours over two years, and every 20 minutes through the weekends
// the clocks change in Paris.
func TestCheckIsTheSameOnEveryDay(t *testing.T) {
	day := 24 * time.Hour
	weekdays := []switchboardv1alpha1.APIKeyRenewalWindow{cronW("0 2 * * 1-5", time.Hour, "Europe/Paris")}
	daily := []switchboardv1alpha1.APIKeyRenewalWindow{weekly(nil, "02:30", time.Hour, "Europe/Paris")}
	tests := []struct {
		name    string
		windows []switchboardv1alpha1.APIKeyRenewalWindow
		period  time.Duration
		refused bool
	}{
		{"weekdays, 3 days: the weekend the clocks go back", weekdays, 3 * day, true},
		{"weekdays, 3 days and a minute", weekdays, 3*day + time.Minute, false},
		{"daily at 02:30, 24h: the night the clocks go back", daily, day, true},
		{"daily at 02:30, 24h1m", daily, day + time.Minute, false},
	}
	var froms []time.Time
	for from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); from.Year() < 2028; from = from.Add(29 * time.Hour) {
		froms = append(froms, from)
	}
	for _, friday := range []time.Time{time.Date(2026, 3, 27, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 23, 0, 0, 0, 0, time.UTC),
		time.Date(2027, 3, 26, 0, 0, 0, 0, time.UTC), time.Date(2027, 10, 29, 0, 0, 0, 0, time.UTC)} {
		for from := friday; from.Before(friday.Add(3 * day)); from = from.Add(20 * time.Minute) {
			froms = append(froms, from)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, from := range froms {
				if got := Check(tt.windows, tt.period, from); (got != "") != tt.refused {
					t.Fatalf("from %s: Check = %q, want refused %v", from, got, tt.refused)
				}
			}
		})
	}
}

// TestCheckCostIsBounded: what one admission costs is counted in calendar lookups, bounded in
// all by maxLookups, and a window is looked up once per opening Check passes (and twice to
// start), not once per step: issue 29's windows, one every 2 minutes and seven on the 29th of
// February, cost the rare windows two lookups each, where each of them was looked up at every
// step (6,250 times, each scanning years of calendar) and an admission took 0.5–0.9 CPU-seconds.
func TestCheckCostIsBounded(t *testing.T) {
	from := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	leapDay := cronW("59 23 29 2 *", time.Minute, "Europe/Paris")
	tests := []struct {
		name    string
		windows []switchboardv1alpha1.APIKeyRenewalWindow
		period  time.Duration
		// rare are the windows that open at most once a year, each looked up at most rareMax
		// times: twice to start, and once per opening passed in 53 weeks and the period.
		rare    []int
		rareMax int
	}{
		// 53 weeks and an hour from 2026-11-27: no 29th of February.
		{"issue 29: every 2 minutes, and seven on the 29th of February", append([]switchboardv1alpha1.APIKeyRenewalWindow{cronW("*/2 * * * *", time.Minute, "Europe/Paris")},
			leapDay, leapDay, leapDay, leapDay, leapDay, leapDay, leapDay), time.Hour, []int{1, 2, 3, 4, 5, 6, 7}, 2},
		// 53 weeks and 4 years: 2028-02-29 and 2032-02-29.
		{"eight on the 29th of February", eight(leapDay), 4 * 366 * day, []int{0, 1, 2, 3, 4, 5, 6, 7}, 4},
		{"eight every 2 minutes", eight(cronW("*/2 * * * *", time.Minute, "Europe/Paris")), time.Hour, nil, 0},
		// 53 weeks and 400 days: the 1st of January 2027, 2028 and 2029.
		{"every minute on the 29th of February, and yearly", []switchboardv1alpha1.APIKeyRenewalWindow{cronW("* * 29 2 *", time.Minute, "UTC"),
			cronW("0 0 1 1 *", time.Hour, "UTC")}, 400 * day, []int{1}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			msg, perWindow := check(tt.windows, tt.period, from)
			total := 0
			for _, n := range perWindow {
				total += n
			}
			t.Logf("%d lookups (%v) in %s: %q", total, perWindow, time.Since(start).Round(time.Millisecond), msg)
			if total > maxLookups+len(tt.windows) {
				t.Errorf("%d lookups, more than the bound of %d", total, maxLookups)
			}
			for _, i := range tt.rare {
				if perWindow[i] > tt.rareMax {
					t.Errorf("window %d, which opens at most yearly, was looked up %d times, want at most %d", i, perWindow[i], tt.rareMax)
				}
			}
		})
	}
}
