package controllers

import (
	"strconv"
	"time"
	_ "time/tzdata" // the image has no zoneinfo, and renewal windows name IANA time zones

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Renewal windows hold a due renewal until one of them is open. They are weekly: each opens at
// its start on its days (every day when none), in its time zone, for its duration. The API
// server refuses windows of which none opens within the renewal period (a CEL rule on
// APIKeyLifecycle), so a due renewal always finds one before the key ends.

var weekdays = map[switchboardv1alpha1.Weekday]time.Weekday{
	"Sunday": time.Sunday, "Monday": time.Monday, "Tuesday": time.Tuesday, "Wednesday": time.Wednesday,
	"Thursday": time.Thursday, "Friday": time.Friday, "Saturday": time.Saturday,
}

// firstOpenAt is the earliest instant at or after t at which one of windows is open; t itself
// when there are none. ok is false when no window opens within a week and a day of t (they
// cannot all be malformed past the schema, but a zone may be unknown to this build: UTC then).
func firstOpenAt(windows []switchboardv1alpha1.APIKeyRenewalWindow, t time.Time) (at time.Time, ok bool) {
	if len(windows) == 0 {
		return t, true
	}
	for _, w := range windows {
		loc, err := time.LoadLocation(w.TimeZone)
		if err != nil || w.TimeZone == "" {
			loc = time.UTC
		}
		hour, minute, valid := timeOfDay(w.Start)
		if !valid {
			continue
		}
		local := t.In(loc)
		for offset := -1; offset <= 8; offset++ {
			day := time.Date(local.Year(), local.Month(), local.Day()+offset, hour, minute, 0, 0, loc)
			if !opensOn(w.Days, day.Weekday()) {
				continue
			}
			end := day.Add(w.Duration.Duration)
			var candidate time.Time
			switch {
			case !t.Before(day) && t.Before(end):
				candidate = t
			case day.After(t):
				candidate = day
			default:
				continue
			}
			if !ok || candidate.Before(at) {
				at, ok = candidate, true
			}
			break
		}
	}
	return at, ok
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

// timeOfDay reads "HH:MM".
func timeOfDay(s string) (hour, minute int, ok bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, 0, false
	}
	h, err1 := strconv.Atoi(s[:2])
	m, err2 := strconv.Atoi(s[3:])
	return h, m, err1 == nil && err2 == nil && h < 24 && m < 60
}
