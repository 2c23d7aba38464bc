package renewalwindow

import (
	"fmt"
	"strings"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Bounds of Check: windows are followed over 53 weeks beyond the renewal period, looking up at
// most maxLookups openings in all (calendar lookups: one cron or weekly "next time after"),
// so that what one admission costs is bounded by what the platform set, whatever the tenant
// writes (8 windows at most, each as fine or as rare as it likes).
//
// The span is a year and then some because the stretch Check starts in is cut short at from:
// the whole of it is seen only when it comes round again. A cron expression repeats at least
// yearly (but for the 29th of February), and a daylight saving rule names a weekday of a month
// ("the last Sunday of October"), so its night comes back within 53 weeks, up to six days
// later in the calendar than a year before. A span of one year missed it on the days just
// after such a night: the weekend the clocks go back was admitted on 2026-10-25 and refused on
// every other day.
const (
	checkSpan  = 53 * 7 * 24 * time.Hour
	maxLookups = 50000
)

// Check says why windows would leave a key unrenewable, or "" when they would not: a window
// that cannot be read or never opens, or a stretch of at least period (the renewal period:
// renewBefore, or its percentage of lifetime) in which none is open, from some instant within
// 53 weeks of from. Such a stretch means a renewal due at its start would find no window before
// the key ends. Windows opening so often that 53 weeks of them cannot be followed in maxLookups
// are refused too, with a message saying so: they are open nearly always, and better dropped.
func Check(windows []switchboardv1alpha1.APIKeyRenewalWindow, period time.Duration, from time.Time) string {
	msg, _ := check(windows, period, from)
	return msg
}

// check is Check, also saying how many calendar lookups it made of each window.
func check(windows []switchboardv1alpha1.APIKeyRenewalWindow, period time.Duration, from time.Time) (msg string, perWindow []int) {
	if len(windows) == 0 || period <= 0 {
		return "", nil
	}
	parsed := make([]window, 0, len(windows))
	perWindow = make([]int, len(windows))
	lookups := 0
	for i := range windows {
		w, err := parse(&windows[i])
		if err != nil {
			return fmt.Sprintf("renewal window %d: %v", i, err), perWindow
		}
		lookups++
		perWindow[i]++
		if w.next(from).IsZero() {
			return fmt.Sprintf("renewal window %d never opens: its cron expression %q matches no date", i, windows[i].Cron), perWindow
		}
		parsed = append(parsed, w)
	}
	end := from.Add(checkSpan + period)
	// covered is the end of the stretch known to be open, starting from the first opening.
	covered := from
	// opening[i] is window i's first opening that ends after covered: open at covered (it
	// extends the stretch) or the next to come. It stays so until covered passes its end, so
	// each window is looked up once per opening passed, not once per step: a rare window (the
	// 29th of February) costs a lookup a year, however fine the others.
	opening := make([]time.Time, len(parsed))
	known := make([]bool, len(parsed))
	for covered.Before(end) {
		var extend, soonest, soonestEnd time.Time
		for i, w := range parsed {
			if !known[i] || (!opening[i].IsZero() && !opening[i].Add(w.duration).After(covered)) {
				if lookups >= maxLookups {
					return "the renewal windows open too often to be checked (more than 50,000 openings in a year): they are open nearly always; drop them, or open them less often for longer", perWindow
				}
				lookups++
				perWindow[i]++
				opening[i], known[i] = w.next(covered.Add(-w.duration)), true
			}
			s := opening[i]
			switch e := s.Add(w.duration); {
			case s.IsZero():
			case !s.After(covered):
				if e.After(extend) {
					extend = e
				}
			case soonest.IsZero() || s.Before(soonest):
				soonest, soonestEnd = s, e
			}
		}
		if !extend.IsZero() {
			covered = extend
			continue
		}
		if soonest.IsZero() {
			return "the renewal windows stop opening within a year", perWindow
		}
		if gap := soonest.Sub(covered); gap >= period {
			return fmt.Sprintf("no renewal window opens between %s and %s (%s), which is not shorter than the renewal period (%s): a key whose renewal falls due then would end before it could be renewed; widen a window, open one more often, or renew earlier",
				covered.UTC().Format(time.RFC3339), soonest.UTC().Format(time.RFC3339), human(gap), human(period)), perWindow
		}
		covered = soonestEnd
	}
	return "", perWindow
}

// human writes a duration as days, hours and minutes ("2 days 23h", "39h", "1h30m").
func human(d time.Duration) string {
	d = d.Round(time.Minute)
	days, hours, minutes := d/(24*time.Hour), d%(24*time.Hour)/time.Hour, d%time.Hour/time.Minute
	var parts []string
	if days >= 2 {
		parts = append(parts, fmt.Sprintf("%d days", days))
	} else {
		hours += days * 24
	}
	clock := ""
	if hours > 0 {
		clock += fmt.Sprintf("%dh", hours)
	}
	if minutes > 0 {
		clock += fmt.Sprintf("%dm", minutes)
	}
	if clock != "" || len(parts) == 0 {
		parts = append(parts, clock)
	}
	return strings.Join(parts, " ")
}
