package ratelimit

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	_ "time/tzdata" // the IANA zones even without /usr/share/zoneinfo (a distroless image)
)

// Refill is how often credits come back: on a calendar, in a time zone.
type Refill int

// The refills a Schedule knows.
const (
	// Hourly refills on the hour of the zone's clock.
	Hourly Refill = iota + 1
	// Daily refills at the zone's midnight: a day across a DST change lasts 23 or 25 hours.
	Daily
	// Weekly refills at midnight starting Schedule.Weekday.
	Weekly
	// Monthly refills at midnight starting Schedule.Day of each month, or the month's last day
	// when it is shorter: a plan refilling on the 31st refills on February 28 (29) and April 30.
	Monthly
	// Interval refills every Schedule.Every from the key's first charged request (its anchor,
	// kept by the store beside the key's credits), whatever the calendar says.
	Interval
)

// Bounds of an Interval schedule's Every, as the APIKey CRD bounds credits.interval.
const (
	MinInterval = time.Minute
	MaxInterval = 8784 * time.Hour // a leap year
)

// Schedule is a refill calendar: it cuts time into periods, each of which has its own credits.
type Schedule struct {
	Refill Refill
	Zone   *time.Location
	// Weekday is the day a Weekly period starts.
	Weekday time.Weekday
	// Day is the day of the month, 1 to 31, a Monthly period starts.
	Day int
	// Every is how long an Interval period lasts.
	Every time.Duration
}

// NewSchedule returns the schedule refilling every r in the IANA time zone zone ("UTC",
// "Europe/Berlin"), on weekday for Weekly and on day of the month for Monthly (both ignored
// otherwise).
func NewSchedule(r Refill, zone string, weekday time.Weekday, day int) (Schedule, error) {
	loc, err := time.LoadLocation(zone)
	switch {
	case err != nil:
		return Schedule{}, fmt.Errorf("time zone %q: %w", zone, err)
	case r < Hourly || r > Monthly:
		return Schedule{}, fmt.Errorf("unknown refill %d", r)
	case r == Weekly && (weekday < time.Sunday || weekday > time.Saturday):
		return Schedule{}, fmt.Errorf("unknown weekday %d", weekday)
	case r == Monthly && (day < 1 || day > 31):
		return Schedule{}, fmt.Errorf("day of the month must be from 1 to 31, not %d", day)
	}
	return Schedule{Refill: r, Zone: loc, Weekday: weekday, Day: day}, nil
}

// NewIntervalSchedule returns the schedule refilling every d from the key's first charged
// request.
func NewIntervalSchedule(d time.Duration) (Schedule, error) {
	if d < MinInterval || d > MaxInterval || d%time.Second != 0 {
		return Schedule{}, fmt.Errorf("an interval must be whole seconds from %s to %s, not %s", MinInterval, MaxInterval, d)
	}
	return Schedule{Refill: Interval, Zone: time.UTC, Every: d}, nil
}

// Period is one period of a Schedule: the instants from Start (included) to End (excluded).
type Period struct {
	Start, End time.Time
	// ID names the period among all of its key's: the refill's letter and Start in Unix
	// seconds ("m1769900400"). Unix seconds rather than a local date, which an hour after a
	// DST change in the autumn repeats; the letter, so that a changed schedule whose period
	// starts at the same instant does not inherit the old period's count.
	ID string
	// Index numbers the schedule's periods one after the other, so that a store can tell how
	// many periods passed since it last counted (a rollover adds the unspent credits of each):
	// hours since the Unix epoch, days (weeks) of the zone's calendar since 1970-01-01 (a day
	// of 23 or 25 hours is still one), months as year*12 + month, intervals since the anchor.
	Index int64
}

// periodLetters are the IDs' first letters, by Refill.
var periodLetters = [...]string{Hourly: "h", Daily: "d", Weekly: "w", Monthly: "m", Interval: "i"}

// longest is how long a schedule's periods last at most, by Refill: a day and a week with a
// DST change's extra hour, an hour with Lord Howe Island's half hour.
var longest = [...]time.Duration{Hourly: 90 * time.Minute, Daily: 25 * time.Hour, Weekly: 7*24*time.Hour + time.Hour, Monthly: 31*24*time.Hour + time.Hour}

// Longest is how long one of s's periods lasts at most.
func (s Schedule) Longest() time.Duration {
	if s.Refill == Interval {
		return s.Every
	}
	return longest[s.Refill]
}

// Kind names s among the schedules a key's credits may have had: a store that finds its
// count kept under another kind starts afresh, as a changed schedule starts a new period.
func (s Schedule) Kind() string {
	switch s.Refill {
	case Interval:
		return "i" + strconv.FormatInt(int64(s.Every/time.Second), 10)
	case Weekly:
		return "w" + s.Zone.String() + "/" + strconv.Itoa(int(s.Weekday))
	case Monthly:
		return "m" + s.Zone.String() + "/" + strconv.Itoa(s.Day)
	default:
		return periodLetters[s.Refill] + s.Zone.String()
	}
}

// PeriodFrom returns the period t belongs to on an Interval schedule whose key was first
// charged at anchor (not after t), and Period(t) on a calendar.
func (s Schedule) PeriodFrom(anchor, t time.Time) Period {
	if s.Refill != Interval {
		return s.Period(t)
	}
	n := int64(t.Sub(anchor) / s.Every)
	start := anchor.Add(time.Duration(n) * s.Every)
	return Period{Start: start, End: start.Add(s.Every), ID: "i" + strconv.FormatInt(start.Unix(), 10), Index: n}
}

// Period returns the period t belongs to; on an Interval schedule, the first one of a key
// first charged at t.
func (s Schedule) Period(t time.Time) Period {
	local := t.In(s.Zone)
	y, m, d := local.Date()
	var start, end time.Time
	switch s.Refill {
	case Hourly:
		// The next hour on the clock is an hour later, except across Lord Howe Island's
		// half-hour DST changes, where it is an hour and a half later.
		start = onTheHour(local)
		if end = onTheHour(start.Add(time.Hour)); !end.After(start) {
			end = onTheHour(start.Add(90 * time.Minute))
		}
	case Daily:
		start, end = s.midnight(y, m, d), s.midnight(y, m, d+1)
	case Weekly:
		back := (int(local.Weekday()) - int(s.Weekday) + 7) % 7
		start, end = s.midnight(y, m, d-back), s.midnight(y, m, d-back+7)
	case Monthly:
		if d < s.dayIn(y, m) {
			m--
		}
		start, end = s.midnight(y, m, s.dayIn(y, m)), s.midnight(y, m+1, s.dayIn(y, m+1))
	case Interval:
		return s.PeriodFrom(t, t)
	default:
		panic(errors.New("a Schedule not made by NewSchedule"))
	}
	return Period{Start: start, End: end, ID: periodLetters[s.Refill] + strconv.FormatInt(start.Unix(), 10), Index: s.index(start)}
}

// index is Period.Index of the calendar period that starts at start.
func (s Schedule) index(start time.Time) int64 {
	if s.Refill == Hourly {
		// Unix hours rather than the clock's, which repeat an hour in the autumn. Periods are an
		// hour apart, so their indexes are too (Lord Howe's 90-minute hour may skip one).
		return floorDiv(start.Unix(), 3600)
	}
	y, m, d := start.In(s.Zone).Date()
	if s.Refill == Monthly {
		return int64(y)*12 + int64(m) - 1
	}
	days := floorDiv(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix(), 24*3600)
	if s.Refill == Weekly {
		return floorDiv(days, 7)
	}
	return days
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// onTheHour is the last instant at or before t at which its zone's clock reads a whole hour.
// Going back past a half-hour DST change can land off the hour again: then it goes on back.
func onTheHour(t time.Time) time.Time {
	for t.Minute() != 0 || t.Second() != 0 || t.Nanosecond() != 0 {
		t = t.Add(-time.Duration(t.Minute())*time.Minute - time.Duration(t.Second())*time.Second - time.Duration(t.Nanosecond()))
	}
	return t
}

// midnight is when day d of month m of year y starts in the zone.
func (s Schedule) midnight(y int, m time.Month, d int) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, s.Zone)
	// Where a DST change skips midnight (Havana, Santiago), time.Date may answer the evening
	// before on the old offset's clock; the day starts when that clock would read midnight.
	if t.Hour() >= 12 {
		sinceMidnight := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second
		t = t.Add(24*time.Hour - sinceMidnight)
	}
	return t
}

// dayIn is the day of month m of year y (normalized as time.Date does: month 0 is the previous
// December) that a Monthly period starts: Day, or the month's last day when it is shorter.
func (s Schedule) dayIn(y int, m time.Month) int {
	last := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
	return min(s.Day, last)
}
