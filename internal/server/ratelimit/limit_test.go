package ratelimit

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	const now = int64(1_800_000_000) * int64(time.Second)
	sec := int64(time.Second)
	tests := []struct {
		name  string
		limit Limit
		tat   int64 // 0: a fresh key
		want  Result
		// wantTAT is the TAT after the decision.
		wantTAT int64
	}{
		{
			name: "a fresh key spends one of its burst", limit: Limit{Requests: 10, Period: 10 * time.Second, Burst: 10},
			want: Result{Allowed: true, Remaining: 9, ResetAfter: time.Second}, wantTAT: now + sec,
		},
		{
			name: "the last request of the burst", limit: Limit{Requests: 10, Period: 10 * time.Second, Burst: 10}, tat: now + 9*sec,
			want: Result{Allowed: true, Remaining: 0, ResetAfter: 10 * time.Second}, wantTAT: now + 10*sec,
		},
		{
			name: "one past the burst is refused and takes nothing", limit: Limit{Requests: 10, Period: 10 * time.Second, Burst: 10}, tat: now + 10*sec,
			want: Result{RetryAfter: time.Second, ResetAfter: 10 * time.Second}, wantTAT: now + 10*sec,
		},
		{
			name: "a TAT in the past is a rested key", limit: Limit{Requests: 10, Period: 10 * time.Second, Burst: 10}, tat: now - 100*sec,
			want: Result{Allowed: true, Remaining: 9, ResetAfter: time.Second}, wantTAT: now + sec,
		},
		{
			name: "a burst smaller than the rate", limit: Limit{Requests: 60, Period: time.Minute, Burst: 2}, tat: now + sec,
			want: Result{Allowed: true, Remaining: 0, ResetAfter: 2 * time.Second}, wantTAT: now + 2*sec,
		},
		{
			name: "a burst smaller than the rate, exceeded", limit: Limit{Requests: 60, Period: time.Minute, Burst: 2}, tat: now + 2*sec,
			want: Result{RetryAfter: time.Second, ResetAfter: 2 * time.Second}, wantTAT: now + 2*sec,
		},
		{
			name: "half an interval regained is not a request", limit: Limit{Requests: 1, Period: 2 * time.Second, Burst: 1}, tat: now + sec,
			want: Result{RetryAfter: time.Second, ResetAfter: time.Second}, wantTAT: now + sec,
		},
		{
			name: "the interval rounds down to the nanosecond", limit: Limit{Requests: 3, Period: time.Second, Burst: 3},
			want: Result{Allowed: true, Remaining: 2, ResetAfter: 333333333}, wantTAT: now + 333333333,
		},
		{
			name: "the largest limit", limit: Limit{Requests: MaxRequests, Period: MaxPeriod, Burst: MaxRequests},
			want: Result{Allowed: true, Remaining: MaxRequests - 1, ResetAfter: MaxPeriod / MaxRequests}, wantTAT: now + int64(MaxPeriod/MaxRequests),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.limit.Validate(); err != nil {
				t.Fatal(err)
			}
			tat, got := decide(tt.tat, now, tt.limit)
			if got != tt.want || tat != tt.wantTAT {
				t.Errorf("decide = %+v, TAT now%+d; want %+v, TAT now%+d", got, tat-now, tt.want, tt.wantTAT-now)
			}
		})
	}
}

// TestDecideExactBurst spends a whole burst at one instant, for several shapes of limit whose
// interval is not a whole number of nanoseconds: exactly Burst requests pass.
func TestDecideExactBurst(t *testing.T) {
	const now = int64(1_800_000_000) * int64(time.Second)
	for _, l := range []Limit{
		{Requests: 3, Period: time.Second, Burst: 3},
		{Requests: 7, Period: time.Minute, Burst: 7},
		{Requests: 100, Period: time.Minute, Burst: 20},
		{Requests: 5, Period: time.Hour, Burst: 5},
		{Requests: MaxRequests, Period: MaxPeriod, Burst: MaxRequests},
	} {
		tat, allowed := int64(0), int64(0)
		for range l.Burst + 10 {
			var res Result
			tat, res = decide(tat, now, l)
			if res.Allowed {
				allowed++
			}
		}
		if allowed != l.Burst {
			t.Errorf("%+v: %d allowed at one instant, want the burst %d", l, allowed, l.Burst)
		}
	}
}

func TestLimitValidate(t *testing.T) {
	tests := []struct {
		limit Limit
		want  string // "" for valid
	}{
		{Limit{Requests: 1, Period: time.Second, Burst: 1}, ""},
		{Limit{Requests: MaxRequests, Period: MaxPeriod, Burst: MaxRequests}, ""},
		{Limit{Requests: 0, Period: time.Second, Burst: 1}, "requests must be from 1"},
		{Limit{Requests: MaxRequests + 1, Period: time.Second, Burst: 1}, "requests must be from 1"},
		{Limit{Requests: 1, Period: 999 * time.Millisecond, Burst: 1}, "period must be from 1s to 24h0m0s"},
		{Limit{Requests: 1, Period: MaxPeriod + time.Second, Burst: 1}, "period must be from 1s"},
		{Limit{Requests: 1, Period: 1500 * time.Millisecond, Burst: 1}, "whole seconds"},
		{Limit{Requests: 1, Period: time.Second, Burst: 0}, "burst must be from 1"},
		{Limit{Requests: 10, Period: time.Second, Burst: 11}, "burst must be from 1 to requests (10)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			err := tt.limit.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate(%+v) = %v, want nil", tt.limit, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate(%+v) = %v, want an error with %q", tt.limit, err, tt.want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	tests := []struct {
		name                string
		limit               Limit
		res                 Result
		wantPolicy, wantNow string
	}{
		{
			name: "allowed: remaining, and one request back in the interval", limit: Limit{Requests: 100, Period: time.Minute, Burst: 100},
			res:        Result{Allowed: true, Remaining: 99, ResetAfter: 600 * time.Millisecond},
			wantPolicy: `"apikey";q=100;w=60`, wantNow: `"apikey";r=99;t=1`,
		},
		{
			name: "allowed with budget spent: t is when the next request is back", limit: Limit{Requests: 10, Period: time.Hour, Burst: 10},
			res:        Result{Allowed: true, Remaining: 0, ResetAfter: time.Hour},
			wantPolicy: `"apikey";q=10;w=3600`, wantNow: `"apikey";r=0;t=360`,
		},
		{
			name: "partly regained: t counts from the fraction already back", limit: Limit{Requests: 10, Period: time.Hour, Burst: 10},
			res:        Result{Allowed: true, Remaining: 3, ResetAfter: 2360 * time.Second},
			wantPolicy: `"apikey";q=10;w=3600`, wantNow: `"apikey";r=3;t=200`,
		},
		{
			name: "refused: t is Retry-After, rounded up", limit: Limit{Requests: 5, Period: time.Second, Burst: 2},
			res:        Result{RetryAfter: 150 * time.Millisecond, ResetAfter: 400 * time.Millisecond},
			wantPolicy: `"apikey";q=5;w=1;switchboard-burst=2`, wantNow: `"apikey";r=0;t=1`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy("uid", tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			SetHeaders(h, p, tt.res)
			if got := strings.Join(h.Values("RateLimit-Policy"), ","); got != tt.wantPolicy {
				t.Errorf("RateLimit-Policy = %q, want %q", got, tt.wantPolicy)
			}
			if got := strings.Join(h.Values("RateLimit"), ","); got != tt.wantNow {
				t.Errorf("RateLimit = %q, want %q", got, tt.wantNow)
			}
		})
	}
}

// TestNextAfterMatchesDecide checks NextAfter against GCRA itself: after waiting it, one more
// request passes, and a nanosecond less would not have regained one.
func TestNextAfterMatchesDecide(t *testing.T) {
	const now = int64(1_800_000_000) * int64(time.Second)
	l := Limit{Requests: 7, Period: 10 * time.Second, Burst: 4}
	tat := int64(0)
	for step := range 12 {
		at := now + int64(step)*300*int64(time.Millisecond)
		var res Result
		tat, res = decide(tat, at, l)
		next := int64(res.NextAfter(l))
		_, before := decide(tat, at+next-1, l)
		_, after := decide(tat, at+next, l)
		if after.Remaining+boolInt(after.Allowed) <= before.Remaining+boolInt(before.Allowed) {
			t.Errorf("step %d (%+v): waiting NextAfter %s regained nothing (before %+v, after %+v)", step, res, time.Duration(next), before, after)
		}
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestPolicyBudgetID: a key keeps its budget while its limit stays (a rotation, any other
// change of the APIKey) and gets a whole one when the limit changes; two keys never share one.
func TestPolicyBudgetID(t *testing.T) {
	limit := Limit{Requests: 100, Period: time.Minute, Burst: 20}
	id := func(uid string, l Limit) string {
		t.Helper()
		p, err := NewPolicy(uid, l)
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	base := id("uid-1", limit)
	tests := []struct {
		name string
		uid  string
		l    Limit
		same bool
	}{
		{name: "the same key and limit", uid: "uid-1", l: limit, same: true},
		{name: "another key", uid: "uid-2", l: limit},
		{name: "more requests", uid: "uid-1", l: Limit{Requests: 101, Period: time.Minute, Burst: 20}},
		{name: "another period", uid: "uid-1", l: Limit{Requests: 100, Period: time.Hour, Burst: 20}},
		{name: "another burst", uid: "uid-1", l: Limit{Requests: 100, Period: time.Minute, Burst: 21}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := id(tt.uid, tt.l); (got == base) != tt.same {
				t.Errorf("budget %q beside %q: same = %v, want %v", got, base, got == base, tt.same)
			}
		})
	}
}

func TestNewPolicyRefuses(t *testing.T) {
	if _, err := NewPolicy("", Limit{Requests: 1, Period: time.Second, Burst: 1}); err == nil {
		t.Error("NewPolicy without an ID succeeded")
	}
	if _, err := NewPolicy("uid", Limit{Requests: 1, Period: time.Second}); err == nil {
		t.Error("NewPolicy with burst 0 succeeded")
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{0: 1, time.Nanosecond: 1, time.Second: 1, time.Second + 1: 2, 59500 * time.Millisecond: 60} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%s) = %d, want %d", d, got, want)
		}
	}
}
