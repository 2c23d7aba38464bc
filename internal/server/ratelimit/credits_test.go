package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// unlimited is a rate no test here reaches: a million requests at once.
var unlimited = Limit{Requests: MaxRequests, Period: time.Second, Burst: MaxRequests}

// newRedisOn is a Redis store whose credits' periods follow clk.
func newRedisOn(t testing.TB, url string, clk clock.PassiveClock) *Redis {
	t.Helper()
	r, err := NewRedis(RedisOptions{URL: url, Timeout: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func creditPolicy(t testing.TB, id string, l Limit, amount int64, s Schedule) *Policy {
	t.Helper()
	p, err := NewCreditPolicy(id, l, Credits{Amount: amount, Schedule: s})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// hammer has clients goroutines make attempts requests of p's key in s in all, and returns how
// many were admitted.
func hammer(t testing.TB, allow func(context.Context, *Policy, int64) (Result, error), p *Policy, clients, attempts int) int64 {
	t.Helper()
	var admitted, left atomic.Int64
	left.Store(int64(attempts))
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				res, err := allow(context.Background(), p, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return admitted.Load()
}

func TestMemoryCreditsExactUnderConcurrency(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	m := NewMemory(clk)
	p := creditPolicy(t, "uid-hammered", unlimited, 1000, schedule(t, Monthly, "UTC", 0, 1))
	start := time.Now()
	if got := hammer(t, m.Allow, p, 64, 20_000); got != 1000 {
		t.Errorf("64 goroutines, 20,000 attempts: %d admitted, want exactly the 1,000 credits", got)
	}
	t.Logf("20,000 attempts in %s", time.Since(start))
}

// TestMemoryCreditsAndRateSpendNothingOnRefusal: a request the rate refuses costs no credit, and
// one the credits refuse costs no rate token.
func TestMemoryCreditsAndRateSpendNothingOnRefusal(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	m := NewMemory(clk)
	refill := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	last := refusalsSpendNothing(t, m, "memory", refill)
	if last.RetryAfter != 20*time.Hour || last.ResetAfter != 24*time.Minute {
		t.Errorf("refused for credits: %+v, want retry after 20h (the refill), reset after 24m (2 tokens)", last)
	}
	clk.SetTime(refill)
	if n, _ := spend(t, m, creditPolicy(t, "uid-credits-first-memory", Limit{Requests: 5, Period: time.Hour, Burst: 5}, 2, schedule(t, Daily, "UTC", 0, 0)), 2); n != 2 {
		t.Errorf("after the refill: %d admitted, want 2", n)
	}
	if refusedByRate := (Result{Credits: CreditResult{Exhausted: true}}).refusedByRate(); refusedByRate {
		t.Error("a refusal for credits counts as the rate's")
	}
}

// TestRedisCreditsAndRateSpendNothingOnRefusal is the same in the Redis script, which also
// shares the rate budget (the TAT) with redis_rate's script for the same key.
func TestRedisCreditsAndRateSpendNothingOnRefusal(t *testing.T) {
	srv := testenv.StartRedis(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r := newRedisOn(t, srv.URL(), clk)
	refusalsSpendNothing(t, r, "redis", schedule(t, Daily, "UTC", 0, 0).Period(clk.Now()).End)

	rate := Limit{Requests: 3, Period: time.Hour, Burst: 3}
	if n, _ := spend(t, r, policy(t, "uid-shared-tat", 3, time.Hour, 3), 2); n != 2 {
		t.Fatalf("without credits: %d of 2 admitted", n)
	}
	if n, last := spend(t, r, creditPolicy(t, "uid-shared-tat", rate, 10, schedule(t, Daily, "UTC", 0, 0)), 3); n != 1 || last.Credits.Exhausted || last.Credits.Remaining != 9 {
		t.Errorf("the same key with credits: %d admitted, last %+v; want the 1 rate token left, 9 credits left", n, last)
	}
}

// refusalsSpendNothing checks, in s, that a rate refusal costs no credit and a credit refusal
// no rate token; it returns the last refusal for credits.
func refusalsSpendNothing(t *testing.T, s Store, name string, refill time.Time) Result {
	t.Helper()
	daily := schedule(t, Daily, "UTC", 0, 0)
	byRate := creditPolicy(t, "uid-rate-first-"+name, Limit{Requests: 2, Period: time.Hour, Burst: 2}, 5, daily)
	n, last := spend(t, s, byRate, 4)
	if n != 2 || last.Allowed || last.Credits.Exhausted || last.Credits.Remaining != 3 || !last.Credits.RefillAt.Equal(refill) {
		t.Errorf("a rate of 2 with 5 credits, 4 requests: %d admitted, last %+v; want 2, refused by the rate, 3 credits left, refill at %s", n, last, refill)
	}
	byCredits := creditPolicy(t, "uid-credits-first-"+name, Limit{Requests: 5, Period: time.Hour, Burst: 5}, 2, daily)
	n, last = spend(t, s, byCredits, 4)
	if n != 2 || !last.Credits.Exhausted || last.Credits.Remaining != 0 || last.Remaining != 3 {
		t.Errorf("a rate of 5 with 2 credits, 4 requests: %d admitted, last %+v; want 2, exhausted, 3 rate tokens left (refusals took none)", n, last)
	}
	return last
}

// TestCreditsRefillAtTheBoundary, in both stores: the last nanosecond of a period is in it, the
// first request of the next sees the whole balance.
func TestCreditsRefillAtTheBoundary(t *testing.T) {
	srv := testenv.StartRedis(t)
	// Hourly in a DST zone, around Redis's own time: Redis expires a period's count on its clock.
	s := schedule(t, Hourly, "America/New_York", 0, 0)
	period := s.Period(time.Now())
	for name, store := range map[string]func(*clocktesting.FakePassiveClock) Store{
		"memory": func(c *clocktesting.FakePassiveClock) Store { return NewMemory(c) },
		"redis":  func(c *clocktesting.FakePassiveClock) Store { return newRedisOn(t, srv.URL(), c) },
	} {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(period.Start)
			st := store(clk)
			p := creditPolicy(t, "uid-boundary-"+name, unlimited, 3, s)
			if n, last := spend(t, st, p, 2); n != 2 || last.Credits.Remaining != 1 || !last.Credits.RefillAt.Equal(period.End) {
				t.Fatalf("at the period's start: %d admitted, last %+v; want 2, 1 left, refill at %s", n, last, period.End)
			}
			clk.SetTime(period.End.Add(-time.Nanosecond))
			if n, last := spend(t, st, p, 2); n != 1 || !last.Credits.Exhausted || last.RetryAfter != time.Nanosecond {
				t.Fatalf("at the last nanosecond: %d admitted, last %+v; want the 1 left, then exhausted until the next one", n, last)
			}
			clk.SetTime(period.End)
			first, err := st.Allow(context.Background(), p, 1)
			if err != nil {
				t.Fatal(err)
			}
			if next := s.Period(period.End); !first.Allowed || first.Credits.Remaining != 2 || !first.Credits.RefillAt.Equal(next.End) {
				t.Errorf("the first request of the next period: %+v, want admitted with 2 of 3 left until %s", first, next.End)
			}
		})
	}
}

// TestRedisCreditsExactAcrossReplicas: three replicas (Limiters, each with its own Redis
// client) share one Redis; 64 clients spread over them make 100,000 attempts on a key with
// 10,000 credits.
func TestRedisCreditsExactAcrossReplicas(t *testing.T) {
	srv := testenv.StartRedis(t)
	p := creditPolicy(t, "uid-replicas", unlimited, 10_000, schedule(t, Monthly, "Europe/Berlin", 0, 31))
	// A clock that stays in one period, even if the test runs across the end of a month.
	clk := clocktesting.NewFakePassiveClock(time.Now())
	var replicas [3]*Limiter
	for i := range replicas {
		// A timeout no busy CI machine reaches: a timed-out request is refused (credits fail
		// closed), which would make the count short.
		replicas[i] = New(Options{Remote: newRedisOn(t, srv.URL(), clk), Timeout: 10 * time.Second, Clock: clk, Logger: logr.Discard()})
	}
	var next atomic.Int64
	allow := func(ctx context.Context, p *Policy, _ int64) (Result, error) {
		d := replicas[next.Add(1)%3].Allow(ctx, p, 1)
		if d.Store != StoreRedis || d.Degraded {
			t.Errorf("decided by %s, degraded %v; want Redis", d.Store, d.Degraded)
		}
		return d.Result, nil
	}
	start := time.Now()
	if got := hammer(t, allow, p, 64, 100_000); got != 10_000 {
		t.Errorf("3 replicas, 64 clients, 100,000 attempts: %d admitted, want exactly the 10,000 credits", got)
	}
	t.Logf("100,000 attempts in %s", time.Since(start))
}

// TestRedisCreditsLateDecrement: a request decided against the previous period after the
// boundary (a replica whose clock is behind) counts on the previous period's numbers, never on
// the new one's; one older than that is refused. The record expires an hour after its period.
func TestRedisCreditsLateDecrement(t *testing.T) {
	srv := testenv.StartRedis(t)
	s := schedule(t, Hourly, "UTC", 0, 0)
	now := time.Now()
	clk := clocktesting.NewFakePassiveClock(now)
	r := newRedisOn(t, srv.URL(), clk)
	p := creditPolicy(t, "uid-late", unlimited, 5, s)
	current := s.Period(now)
	previous := s.Period(current.Start.Add(-time.Nanosecond))
	older := s.Period(previous.Start.Add(-time.Nanosecond))

	if res, err := r.Allow(context.Background(), p, 1); err != nil || !res.Allowed || res.Credits.Remaining != 4 {
		t.Fatalf("the current period's first request: %+v, %v", res, err)
	}
	late, err := r.spendCredit(context.Background(), p, 2, now, &previous)
	if err != nil {
		t.Fatal(err)
	}
	if !late.Allowed || late.Credits.Remaining != 3 || !late.Credits.RefillAt.Equal(previous.End) {
		t.Errorf("the late request: %+v, want counted on the previous period (3 of 5 left)", late)
	}
	if tooLate, err := r.spendCredit(context.Background(), p, 1, now, &older); err != nil || tooLate.Allowed || !tooLate.Credits.Exhausted {
		t.Errorf("a request two periods late: %+v, %v; want refused", tooLate, err)
	}
	res, err := r.Allow(context.Background(), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed || res.Credits.Remaining != 3 {
		t.Errorf("the current period after a late request: %+v, want 3 left after this one (the late one took none of it)", res)
	}
	ttl, err := r.client.PTTL(context.Background(), redisKeyPrefix+p.creditsID).Result()
	if want := current.End.Add(creditsSlack).Sub(now); err != nil || ttl < want-5*time.Second || ttl > want+time.Second {
		t.Errorf("the record expires in %s (%v), want %s", ttl, err, want)
	}
}

// TestLimiterCreditsFailClosed: with Redis down, a key with credits is refused, not counted
// per replica; a key without keeps today's fallback to memory.
func TestLimiterCreditsFailClosed(t *testing.T) {
	srv := testenv.StartRedis(t)
	l := New(Options{Remote: newRedis(t, srv.URL(), ""), Logger: logr.Discard()})
	withCredits := creditPolicy(t, "uid-closed", unlimited, 100, schedule(t, Daily, "UTC", 0, 0))
	if d := l.Allow(context.Background(), withCredits, 1); !d.Allowed || d.Store != StoreRedis {
		t.Fatalf("with Redis up: %+v, want admitted by Redis", d)
	}
	srv.Stop()
	for i := range 2 { // the failure, then within RemoteRetry of it
		if d := l.Allow(context.Background(), withCredits, 1); d.Allowed || !d.Credits.Unavailable || !d.Degraded || d.RetryAfter != RemoteRetry {
			t.Errorf("request %d with Redis down: %+v, want refused, credits unavailable, degraded, retry after %s", i, d, RemoteRetry)
		}
	}
	if d := l.Allow(context.Background(), policy(t, "uid-open", 10, time.Minute, 10), 1); !d.Allowed || d.Store != StoreMemory {
		t.Errorf("a key without credits with Redis down: %+v, want admitted from memory", d)
	}
}

func TestMemorySweepForgetsEndedPeriods(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	m := NewMemory(clk)
	spend(t, m, creditPolicy(t, "uid-swept", Limit{Requests: 10, Period: time.Second, Burst: 10}, 5, schedule(t, Hourly, "UTC", 0, 0)), 1)
	clk.SetTime(clk.Now().Add(time.Second))
	m.Sweep()
	if m.Len() != 1 {
		t.Fatalf("within the period: %d entries, want its count", m.Len())
	}
	clk.SetTime(time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC).Add(creditsSlack - time.Nanosecond))
	m.Sweep()
	if m.Len() != 1 {
		t.Fatalf("within the slack after the period: %d entries, want its record", m.Len())
	}
	clk.SetTime(time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC).Add(creditsSlack))
	m.Sweep()
	if m.Len() != 0 {
		t.Errorf("after the period and its slack: %d entries, want none", m.Len())
	}
}

func TestNewCreditPolicyRefuses(t *testing.T) {
	daily, err := NewSchedule(Daily, "UTC", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Credits{{Amount: 0, Schedule: daily}, {Amount: MaxCredits + 1, Schedule: daily}, {Amount: 5}} {
		if _, err := NewCreditPolicy("uid", unlimited, c); err == nil {
			t.Errorf("NewCreditPolicy(%+v) succeeded", c)
		}
	}
	if _, err := NewCreditPolicy("", unlimited, Credits{Amount: 5, Schedule: daily}); err == nil {
		t.Error("a credit policy without a key's ID was built")
	}
}

// BenchmarkAllow is what credits add to a decision: in memory, a period's computation and a
// count under the same lock; in Redis, a second GET and an INCR in the same script run.
func BenchmarkAllow(b *testing.B) {
	srv := testenv.StartRedis(b)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r := newRedisOn(b, srv.URL(), clk)
	rate, err := NewPolicy("uid-bench-rate", unlimited)
	if err != nil {
		b.Fatal(err)
	}
	// More credits than any run spends, so that every request does the same work.
	credits := creditPolicy(b, "uid-bench-credits", unlimited, MaxCredits, schedule(b, Monthly, "Europe/Berlin", 0, 1))
	for _, store := range []struct {
		name string
		s    Store
	}{{"memory", NewMemory(clk)}, {"redis", r}} {
		for _, p := range []*Policy{rate, credits} {
			name := store.name + "/rate"
			if p.Credits != nil {
				name += "+credits"
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					if _, err := store.s.Allow(context.Background(), p, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func TestParseCreditsReplyRefusesOtherAnswers(t *testing.T) {
	for _, v := range [][]any{nil, {int64(1), int64(0), "-1", "0.5"}, {int64(1), int64(0), "-1", "x", int64(0), int64(0), int64(0), int64(0), int64(0)},
		{"1", int64(0), "-1", "0.5", int64(0), int64(0), int64(0), int64(0), int64(0)}, {int64(1), int64(0), "-1", "0.5", int64(0), "7", int64(0), int64(0), int64(0)}} {
		if _, _, err := parseCreditsReply(v, 0); err == nil {
			t.Errorf("parseCreditsReply(%v) succeeded", v)
		}
	}
	res, c, err := parseCreditsReply([]any{int64(1), int64(4), "-1", "0.5", int64(0), int64(7), int64(3), int64(0), int64(9), int64(2), int64(1)}, 1)
	if err != nil || !res.Allowed || res.Remaining != 4 || res.RetryAfter != 0 || res.ResetAfter != 500*time.Millisecond ||
		c.exhausted || c.remaining != 7 || c.index != 3 || c.fromPeriod != 2 || c.fromGrants[0] != 1 {
		t.Errorf("parseCreditsReply: %+v, %+v, %v", res, c, err)
	}
}

// TestLimiterBalance: Balance reads a key's credits in memory and in Redis without spending
// one; a key without credits has none.
func TestLimiterBalance(t *testing.T) {
	srv := testenv.StartRedis(t)
	for name, o := range map[string]Options{
		"memory": {Logger: logr.Discard()},
		"redis":  {Remote: newRedis(t, srv.URL(), ""), Logger: logr.Discard()},
	} {
		t.Run(name, func(t *testing.T) {
			l := New(o)
			p := creditPolicy(t, "uid-balance-"+name, unlimited, 100, schedule(t, Daily, "UTC", 0, 0))
			for range 63 {
				if d := l.Allow(context.Background(), p, 1); !d.Allowed {
					t.Fatalf("refused: %+v", d)
				}
			}
			for range 2 { // a second read finds the same: reading spends nothing
				b, ok, err := l.Balance(context.Background(), p)
				if err != nil || !ok || b.Used != 63 || b.Remaining != 37 || b.Period != p.Credits.Schedule.Period(time.Now()) {
					t.Fatalf("balance %+v, %v, %v; want 63 used and 37 remaining in today's period", b, ok, err)
				}
			}
			if _, ok, err := l.Balance(context.Background(), policy(t, "uid-no-credits-"+name, 10, time.Minute, 10)); ok || err != nil {
				t.Errorf("a key without credits has a balance (%v, %v)", ok, err)
			}
		})
	}
}
