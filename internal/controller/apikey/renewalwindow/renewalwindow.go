// Package renewalwindow computes when an APIKey's renewal windows are open: the next instant a
// due renewal may happen (Next, for the operator), and whether some window opens within every
// renewal period (Check, for the admission webhook: cert-manager#9146 admitted windows that
// could never open in time, and left certificates failing for good).
//
// A window opens weekly (at start, on days) or at each time of a standard five-field cron
// expression, in its IANA time zone (UTC when none), and stays open for its duration.
package renewalwindow

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	_ "time/tzdata" // the image has no zoneinfo, and renewal windows name IANA time zones

	"github.com/robfig/cron/v3"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// window is one parsed renewal window: next gives its first opening strictly after a time.
type window struct {
	next     func(t time.Time) time.Time
	duration time.Duration
}

// parser reads standard five-field expressions, and no descriptors (@every is not anchored to
// the calendar, and the schema refuses "@" anyway).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

var weekdays = map[switchboardv1alpha1.Weekday]time.Weekday{
	"Sunday": time.Sunday, "Monday": time.Monday, "Tuesday": time.Tuesday, "Wednesday": time.Wednesday,
	"Thursday": time.Thursday, "Friday": time.Friday, "Saturday": time.Saturday,
}

// parse reads w. A cron window opens at its expression's times as robfig/cron computes them
// (as cert-manager's do: a time that daylight saving skips is skipped). A weekly window opens
// at start on its days, as time.Date places a wall-clock time (one that daylight saving skips
// is moved, never dropped), as it always has.
func parse(w *switchboardv1alpha1.APIKeyRenewalWindow) (window, error) {
	loc := time.UTC
	if w.TimeZone != "" {
		l, err := time.LoadLocation(w.TimeZone)
		if err != nil {
			return window{}, fmt.Errorf("unknown time zone %q", w.TimeZone)
		}
		loc = l
	}
	if w.Duration.Duration <= 0 {
		return window{}, errors.New("no duration")
	}
	if w.Cron != "" {
		sched, err := parser.Parse(w.Cron)
		if err != nil {
			return window{}, fmt.Errorf("cron %q: %w", w.Cron, err)
		}
		return window{duration: w.Duration.Duration, next: func(t time.Time) time.Time {
			n := sched.Next(t.In(loc)) // zero when none within five years ("0 0 30 2 *")
			if n.IsZero() {
				return n
			}
			return n.UTC()
		}}, nil
	}
	hour, minute, ok := timeOfDay(w.Start)
	if !ok {
		return window{}, fmt.Errorf("start %q is not HH:MM", w.Start)
	}
	days := w.Days
	return window{duration: w.Duration.Duration, next: func(t time.Time) time.Time {
		local := t.In(loc)
		for offset := 0; offset <= 8; offset++ {
			day := time.Date(local.Year(), local.Month(), local.Day()+offset, hour, minute, 0, 0, loc)
			if day.After(t) && opensOn(days, day.Weekday()) {
				return day.UTC()
			}
		}
		return time.Time{}
	}}, nil
}

func opensOn(days []switchboardv1alpha1.Weekday, d time.Weekday) bool {
	if len(days) == 0 {
		return true
	}
	for _, day := range days {
		if weekdays[day] == d {
			return true
		}
	}
	return false
}

// openAt is the earliest instant at or after t at which w is open, or zero.
func (w window) openAt(t time.Time) time.Time {
	// An opening in (t-duration, t] leaves it open at t.
	if s := w.next(t.Add(-w.duration)); !s.IsZero() && !s.After(t) {
		return t
	}
	return w.next(t)
}

// Next is the earliest instant at or after t at which one of windows is open: t itself when
// there are none. ok is false when none opens within five years of t, or none can be read
// (the API server and the webhook refuse both; a zone unknown to this build is one).
func Next(windows []switchboardv1alpha1.APIKeyRenewalWindow, t time.Time) (at time.Time, ok bool) {
	if len(windows) == 0 {
		return t, true
	}
	for i := range windows {
		w, err := parse(&windows[i])
		if err != nil {
			continue
		}
		if c := w.openAt(t); !c.IsZero() && (!ok || c.Before(at)) {
			at, ok = c, true
		}
	}
	return at, ok
}

// timeOfDay reads "HH:MM".
func timeOfDay(s string) (hour, minute int, ok bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, 0, false
	}
	h, err1 := strconv.Atoi(s[:2])
	m, err2 := strconv.Atoi(s[3:])
	return h, m, err1 == nil && err2 == nil && h < 24 && m < 60
}
