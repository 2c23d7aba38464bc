package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

func schedule(t testing.TB, r Refill, zone string, weekday time.Weekday, day int) Schedule {
	t.Helper()
	s, err := NewSchedule(r, zone, weekday, day)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// at is a local time in zone, written as in a calendar: "2026-02-28 00:00".
func at(t testing.TB, zone, local string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", local, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSchedulePeriods(t *testing.T) {
	const berlin, newYork = "Europe/Berlin", "America/New_York"
	for _, c := range []struct {
		name       string
		refill     Refill
		zone       string
		weekday    time.Weekday
		day        int
		t          string // local, in zone
		start, end string // local, in zone
		hours      float64
	}{
		{"monthly on the 31st, in January", Monthly, "UTC", 0, 31, "2026-02-10 12:00", "2026-01-31 00:00", "2026-02-28 00:00", 28 * 24},
		{"monthly on the 31st, from February's last day", Monthly, "UTC", 0, 31, "2026-02-28 00:00", "2026-02-28 00:00", "2026-03-31 00:00", 31 * 24},
		{"monthly on the 31st, into a 30-day month", Monthly, "UTC", 0, 31, "2026-04-15 09:00", "2026-03-31 00:00", "2026-04-30 00:00", 30 * 24},
		{"monthly on the 31st, from April's last day", Monthly, "UTC", 0, 31, "2026-05-01 09:00", "2026-04-30 00:00", "2026-05-31 00:00", 31 * 24},
		{"monthly on the 30th, in a leap year's February", Monthly, "UTC", 0, 30, "2028-02-29 00:00", "2028-02-29 00:00", "2028-03-30 00:00", 30 * 24},
		{"monthly on the 30th, before a leap day", Monthly, "UTC", 0, 30, "2028-02-28 23:59", "2028-01-30 00:00", "2028-02-29 00:00", 30 * 24},
		{"monthly on the 1st, across the year", Monthly, berlin, 0, 1, "2026-12-31 23:59", "2026-12-01 00:00", "2027-01-01 00:00", 31 * 24},
		{"monthly on the 15th, before it in January", Monthly, "UTC", 0, 15, "2027-01-03 00:00", "2026-12-15 00:00", "2027-01-15 00:00", 31 * 24},
		{"monthly across the spring DST change", Monthly, berlin, 0, 1, "2026-03-29 03:00", "2026-03-01 00:00", "2026-04-01 00:00", 31*24 - 1},
		{"daily across the spring DST change: 23 h", Daily, berlin, 0, 0, "2026-03-29 12:00", "2026-03-29 00:00", "2026-03-30 00:00", 23},
		{"daily across the autumn DST change: 25 h", Daily, berlin, 0, 0, "2026-10-25 23:59", "2026-10-25 00:00", "2026-10-26 00:00", 25},
		{"daily in New York across the spring DST change", Daily, newYork, 0, 0, "2026-03-08 01:59", "2026-03-08 00:00", "2026-03-09 00:00", 23},
		{"daily where the spring DST change skips midnight", Daily, "America/Havana", 0, 0, "2026-03-08 12:00", "2026-03-08 01:00", "2026-03-09 00:00", 23},
		{"daily, the day before midnight is skipped", Daily, "America/Havana", 0, 0, "2026-03-07 23:30", "2026-03-07 00:00", "2026-03-08 01:00", 24},
		{"daily, at midnight", Daily, newYork, 0, 0, "2026-03-09 00:00", "2026-03-09 00:00", "2026-03-10 00:00", 24},
		{"weekly on Monday, on a Sunday", Weekly, "UTC", time.Monday, 0, "2026-03-08 23:59", "2026-03-02 00:00", "2026-03-09 00:00", 7 * 24},
		{"weekly on Monday, on the Monday", Weekly, "UTC", time.Monday, 0, "2026-03-09 00:00", "2026-03-09 00:00", "2026-03-16 00:00", 7 * 24},
		{"weekly on Sunday, across the month and the spring DST change", Weekly, berlin, time.Sunday, 0, "2026-03-31 10:00", "2026-03-29 00:00", "2026-04-05 00:00", 7*24 - 1},
		{"weekly on Sunday, the week before the spring DST change", Weekly, berlin, time.Sunday, 0, "2026-03-28 10:00", "2026-03-22 00:00", "2026-03-29 00:00", 7 * 24},
		{"hourly", Hourly, "UTC", 0, 0, "2026-02-10 12:59", "2026-02-10 12:00", "2026-02-10 13:00", 1},
		{"hourly in a half-hour zone", Hourly, "Asia/Kolkata", 0, 0, "2026-02-10 12:30", "2026-02-10 12:00", "2026-02-10 13:00", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := schedule(t, c.refill, c.zone, c.weekday, c.day)
			p := s.Period(at(t, c.zone, c.t))
			start, end := at(t, c.zone, c.start), at(t, c.zone, c.end)
			if !p.Start.Equal(start) || !p.End.Equal(end) {
				t.Fatalf("period of %s: %s to %s, want %s to %s", c.t, p.Start, p.End, start, end)
			}
			if got := p.End.Sub(p.Start).Hours(); got != c.hours {
				t.Errorf("the period lasts %v h, want %v h", got, c.hours)
			}
			if want := periodLetters[c.refill] + strconv.FormatInt(start.Unix(), 10); p.ID != want {
				t.Errorf("ID %q, want %q", p.ID, want)
			}
			// The edges: the first instant is this period, the last nanosecond before it the
			// previous one, and the end the next one.
			if first := s.Period(p.Start); first != p {
				t.Errorf("the period of its own start is %+v", first)
			}
			if prev := s.Period(p.Start.Add(-time.Nanosecond)); !prev.End.Equal(p.Start) || prev.ID == p.ID {
				t.Errorf("the last nanosecond before the start is in %+v, want the period ending at %s", prev, p.Start)
			}
			if next := s.Period(p.End); !next.Start.Equal(p.End) {
				t.Errorf("the end is in %+v, want the period starting at %s", next, p.End)
			}
			if last := s.Period(p.End.Add(-time.Nanosecond)); last != p {
				t.Errorf("the last nanosecond is in %+v, want %+v", last, p)
			}
		})
	}
}

// TestScheduleAutumnRepeatedHour: Berlin's 02:00–03:00 happens twice on 2026-10-25; they are
// two hourly periods with two IDs.
func TestScheduleAutumnRepeatedHour(t *testing.T) {
	s := schedule(t, Hourly, "Europe/Berlin", 0, 0)
	first := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC) // 02:30 CEST
	second := first.Add(time.Hour)                          // 02:30 CET
	a, b := s.Period(first), s.Period(second)
	if a.ID == b.ID || !a.End.Equal(b.Start) || a.End.Sub(a.Start) != time.Hour || b.End.Sub(b.Start) != time.Hour {
		t.Errorf("the repeated hour: %+v then %+v, want two one-hour periods, one after the other", a, b)
	}
}

func TestNewScheduleRefuses(t *testing.T) {
	for _, c := range []struct {
		refill  Refill
		zone    string
		weekday time.Weekday
		day     int
	}{
		{Daily, "Mars/Olympus_Mons", 0, 0},
		{0, "UTC", 0, 0},
		{Monthly + 1, "UTC", 0, 0},
		{Monthly, "UTC", 0, 0},
		{Monthly, "UTC", 0, 32},
		{Weekly, "UTC", 7, 0},
	} {
		if _, err := NewSchedule(c.refill, c.zone, c.weekday, c.day); err == nil {
			t.Errorf("NewSchedule(%d, %q, %d, %d) succeeded", c.refill, c.zone, c.weekday, c.day)
		}
	}
}

// TestSchedulePeriodsTile walks a year in zones with unusual clocks (a half-hour offset, a
// half-hour DST change, DST changes at midnight): every instant is in its period, and the
// periods follow one another without a gap or an overlap.
func TestSchedulePeriodsTile(t *testing.T) {
	for _, zone := range []string{"UTC", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe", "America/Havana", "America/Santiago", "Asia/Beirut"} {
		for _, r := range []Refill{Hourly, Daily, Weekly, Monthly} {
			s := schedule(t, r, zone, time.Wednesday, 31)
			for at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() == 2026; at = at.Add(97 * time.Minute) {
				p := s.Period(at)
				if at.Before(p.Start) || !at.Before(p.End) || s.Period(p.Start) != p || s.Period(p.End.Add(-time.Nanosecond)) != p || !s.Period(p.End).Start.Equal(p.End) {
					t.Fatalf("%s, refill %d: %s is in %+v, which does not tile", zone, r, at, p)
				}
			}
		}
	}
}
