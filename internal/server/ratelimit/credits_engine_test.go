package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// onEachStore runs f on a memory store and on a Redis store (one real redis-server), both on a
// fake clock starting at start. Keys are the test's name: each store sees its own.
func onEachStore(t *testing.T, start time.Time, f func(t *testing.T, s Store, clk *clocktesting.FakePassiveClock)) {
	srv := testenv.StartRedis(t)
	t.Run("memory", func(t *testing.T) {
		clk := clocktesting.NewFakePassiveClock(start)
		f(t, NewMemory(clk), clk)
	})
	t.Run("redis", func(t *testing.T) {
		clk := clocktesting.NewFakePassiveClock(start)
		f(t, newRedisOn(t, srv.URL(), clk), clk)
	})
}

func creditsPolicy(t testing.TB, l Limit, c Credits) *Policy {
	t.Helper()
	p, err := NewCreditPolicy("uid-"+strings.ReplaceAll(t.Name(), "/", "-"), l, c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// charge asks s for one request of p's key costing cost and fails the test on an error.
func charge(t *testing.T, s Store, p *Policy, cost int64) Result {
	t.Helper()
	res, err := s.Allow(context.Background(), p, cost)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// balanceOf reads p's balance from s at clk's time, as Limiter.Balance does.
func balanceOf(t *testing.T, s Store, p *Policy, clk *clocktesting.FakePassiveClock) Balance {
	t.Helper()
	rec, err := s.record(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return p.balance(rec, clk.Now())
}

// TestCreditsCost: a request takes its cost; one costing more than remains is refused and takes
// nothing, not even its rate token.
func TestCreditsCost(t *testing.T) {
	onEachStore(t, at(t, "UTC", "2026-06-10 12:00"), func(t *testing.T, s Store, _ *clocktesting.FakePassiveClock) {
		p := creditsPolicy(t, Limit{Requests: 5, Period: time.Hour, Burst: 5}, Credits{Amount: 10, Schedule: schedule(t, Daily, "UTC", 0, 0)})
		for i, want := range []int64{6, 2} {
			if res := charge(t, s, p, 4); !res.Allowed || res.Credits.Remaining != want || res.Credits.Charged.FromPeriod != 4 {
				t.Fatalf("request %d costing 4: %+v, want admitted with %d left", i, res, want)
			}
		}
		res := charge(t, s, p, 3)
		if res.Allowed || !res.Credits.Exhausted || res.Credits.Remaining != 2 || res.Remaining != 3 || res.Credits.Charged.Total() != 0 {
			t.Fatalf("costing 3 with 2 left: %+v, want refused, 2 credits and 3 rate tokens left", res)
		}
		if res := charge(t, s, p, 2); !res.Allowed || res.Credits.Remaining != 0 || res.Remaining != 2 {
			t.Errorf("costing 2 with 2 left: %+v, want admitted, none left, 2 rate tokens left", res)
		}
	})
}

// TestCreditsFreeRequest: a request costing 0 takes its rate token and no credit, and is
// admitted with no credit left; the rate still refuses it when spent.
func TestCreditsFreeRequest(t *testing.T) {
	onEachStore(t, at(t, "UTC", "2026-06-10 12:00"), func(t *testing.T, s Store, clk *clocktesting.FakePassiveClock) {
		p := creditsPolicy(t, Limit{Requests: 3, Period: time.Hour, Burst: 3}, Credits{Amount: 1, Schedule: schedule(t, Daily, "UTC", 0, 0)})
		if res := charge(t, s, p, 1); !res.Allowed || res.Credits.Remaining != 0 {
			t.Fatalf("the one credit: %+v", res)
		}
		if res := charge(t, s, p, 0); !res.Allowed || res.Credits.Exhausted || res.Credits.Charged.Total() != 0 || res.Remaining != 1 {
			t.Errorf("a free request with no credit left: %+v, want admitted, nothing charged, 1 rate token left", res)
		}
		if res := charge(t, s, p, 1); res.Allowed || !res.Credits.Exhausted {
			t.Errorf("a paid request with no credit left: %+v, want refused for credits", res)
		}
		charge(t, s, p, 0)
		if res := charge(t, s, p, 0); res.Allowed || res.Credits.Exhausted {
			t.Errorf("a free request past the rate: %+v, want refused by the rate", res)
		}
		if b := balanceOf(t, s, p, clk); b.Used != 1 {
			t.Errorf("after free requests: %+v, want 1 used", b)
		}
	})
}

// TestCreditsRefund: a refund gives back exactly what the charge took, to the period and the
// grant it took it from, and to the previous period after a refill.
func TestCreditsRefund(t *testing.T) {
	onEachStore(t, at(t, "UTC", "2026-06-10 12:00"), func(t *testing.T, s Store, clk *clocktesting.FakePassiveClock) {
		p := creditsPolicy(t, unlimited, Credits{Amount: 2, Schedule: schedule(t, Daily, "UTC", 0, 0),
			Grants: []Grant{{ID: "welcome", Amount: 5}}})
		res := charge(t, s, p, 4)
		if ch := res.Credits.Charged; !res.Allowed || ch.FromPeriod != 2 || ch.FromGrants == nil || ch.FromGrants[0] != 2 || ch.Total() != 4 {
			t.Fatalf("costing 4 with 2 in the period and a grant of 5: %+v, want 2 from each", res)
		}
		if err := s.Refund(context.Background(), p, res.Credits.Charged); err != nil {
			t.Fatal(err)
		}
		if b := balanceOf(t, s, p, clk); b.Used != 0 || b.Allowance != 2 || b.Granted != 5 || b.Remaining != 7 {
			t.Errorf("after the refund: %+v, want all 7 back (2 + 5)", b)
		}
		// Charged yesterday, refunded today: yesterday's count gets it back, today's is whole.
		res = charge(t, s, p, 1)
		clk.SetTime(at(t, "UTC", "2026-06-11 00:00"))
		charge(t, s, p, 1)
		if err := s.Refund(context.Background(), p, res.Credits.Charged); err != nil {
			t.Fatal(err)
		}
		rec, err := s.record(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if rec.prev.spent != 0 || rec.cur.spent != 1 {
			t.Errorf("a refund of yesterday's charge: yesterday spent %d, today %d; want 0 and 1", rec.prev.spent, rec.cur.spent)
		}
	})
}

// TestCreditsRollover: with Add, each period's allowance is min(cap, amount + what the previous
// left), idle periods accumulating up to the cap, across a month end and a year end.
func TestCreditsRollover(t *testing.T) {
	onEachStore(t, at(t, "Europe/Paris", "2026-11-30 10:00"), func(t *testing.T, s Store, clk *clocktesting.FakePassiveClock) {
		p := creditsPolicy(t, unlimited, Credits{Amount: 10, Cap: 25, Schedule: schedule(t, Monthly, "Europe/Paris", 0, 1)})
		charge(t, s, p, 3) // November: 7 left
		for _, step := range []struct {
			at        string
			allowance int64
		}{
			{"2026-12-01 00:00", 17}, // 10 + 7
			{"2027-01-01 00:00", 25}, // 10 + 17, capped
			{"2027-03-01 00:00", 25}, // idle months stay at the cap
		} {
			clk.SetTime(at(t, "Europe/Paris", step.at))
			if b := balanceOf(t, s, p, clk); b.Allowance != step.allowance || b.Remaining != step.allowance {
				t.Fatalf("at %s: %+v, want an allowance of %d", step.at, b, step.allowance)
			}
		}
		if res := charge(t, s, p, 25); !res.Allowed || res.Credits.Remaining != 0 {
			t.Fatalf("spending the cap: %+v", res)
		}
		clk.SetTime(at(t, "Europe/Paris", "2027-04-01 00:00"))
		if b := balanceOf(t, s, p, clk); b.Allowance != 10 {
			t.Errorf("after a month that spent everything: %+v, want the amount alone", b)
		}
		// Two idle months from an allowance of 10: 20, then 25.
		clk.SetTime(at(t, "Europe/Paris", "2027-06-01 00:00"))
		if res := charge(t, s, p, 1); !res.Allowed || res.Credits.Remaining != 24 {
			t.Errorf("two months on: %+v, want 25 - 1 left", res)
		}
	})
}

// TestCreditsRolloverIdleAccumulation is settle's arithmetic alone, on gaps of many periods.
func TestCreditsRolloverIdleAccumulation(t *testing.T) {
	for _, c := range []struct {
		name              string
		amount, cap, left int64
		gap               int64
		want              int64
	}{
		{"the next period", 10, 100, 4, 1, 14},
		{"two on", 10, 100, 4, 2, 24},
		{"up to the cap", 10, 100, 4, 20, 100},
		{"a year of hours at the largest amounts", MaxCredits, MaxCredits, MaxCredits, 8784, MaxCredits},
		{"a small amount and a large cap, a century of months", 1, MaxCredits, 0, 1200, 1200},
		{"Reset", 10, 10, 10, 3, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := creditsPolicy(t, unlimited, Credits{Amount: c.amount, Cap: c.cap, Schedule: schedule(t, Hourly, "UTC", 0, 0)})
			start := at(t, "UTC", "2026-01-01 00:00")
			rec, period := p.settle(creditRecord{}, start, nil)
			rec.cur.spent = c.amount - c.left
			rec, _ = p.settle(rec, start.Add(time.Duration(c.gap)*time.Hour), nil)
			if got := p.Credits.allowance(rec.cur); got != c.want || rec.cur.index != period.Index+c.gap || rec.prev.index != rec.cur.index-1 {
				t.Errorf("allowance %d at index %d (previous %d), want %d at %d", got, rec.cur.index, rec.prev.index, c.want, period.Index+c.gap)
			}
		})
	}
}

// TestCreditsGrants: a grant is spent after the period's credits, the earliest-expiring first;
// applied twice it adds once; removed, what it had left is gone; expired, too.
func TestCreditsGrants(t *testing.T) {
	onEachStore(t, at(t, "UTC", "2026-06-10 12:00"), func(t *testing.T, s Store, clk *clocktesting.FakePassiveClock) {
		daily := schedule(t, Daily, "UTC", 0, 0)
		soon, later := at(t, "UTC", "2026-06-12 00:00"), at(t, "UTC", "2026-07-01 00:00")
		grants := []Grant{{ID: "forever", Amount: 100}, {ID: "later", Amount: 5, ExpiresAt: later}, {ID: "soon", Amount: 3, ExpiresAt: soon}}
		p := creditsPolicy(t, unlimited, Credits{Amount: 2, Schedule: daily, Grants: grants})
		res := charge(t, s, p, 6)
		if ch := res.Credits.Charged; !res.Allowed || ch.FromPeriod != 2 || ch.FromGrants == nil || *ch.FromGrants != [MaxGrants]int64{0: 3, 1: 1} {
			t.Fatalf("costing 6: %+v, want 2 from the period, 3 from soon, 1 from later (grants sorted soon, later, forever)", ch)
		}
		// The same grants applied again (GitOps): a new policy, the same counts.
		again := creditsPolicy(t, unlimited, Credits{Amount: 2, Schedule: daily, Grants: grants})
		if b := balanceOf(t, s, again, clk); b.Remaining != 104 || b.Granted != 104 {
			t.Errorf("the grants applied again: %+v, want 4 left of later and 100 of forever", b)
		}
		// later removed: its 4 are gone, and the next charge forgets its count.
		removed := creditsPolicy(t, unlimited, Credits{Amount: 2, Schedule: daily, Grants: []Grant{grants[0], grants[2]}})
		if res := charge(t, s, removed, 1); !res.Allowed || res.Credits.Remaining != 99 {
			t.Errorf("later removed: %+v, want 99 left of forever", res)
		}
		if rec, err := s.record(context.Background(), removed); err != nil || len(rec.grants) != 2 {
			t.Errorf("the record's grants after a removal: %v (%v), want forever's and soon's", rec.grants, err)
		}
		// soon expired: the next day's period and forever's 99.
		clk.SetTime(soon)
		if b := balanceOf(t, s, removed, clk); b.Allowance != 2 || b.Granted != 99 {
			t.Errorf("after soon expired: %+v, want 2 + 99", b)
		}
	})
}

// TestCreditsInterval: an Interval key's periods start at its first charged request.
func TestCreditsInterval(t *testing.T) {
	first := at(t, "UTC", "2026-06-10 12:34")
	onEachStore(t, first, func(t *testing.T, s Store, clk *clocktesting.FakePassiveClock) {
		every, err := NewIntervalSchedule(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		p := creditsPolicy(t, unlimited, Credits{Amount: 2, Schedule: every})
		if res := charge(t, s, p, 2); !res.Allowed || !res.Credits.RefillAt.Equal(first.Add(time.Hour)) || res.Credits.Window != time.Hour {
			t.Fatalf("the first request: %+v, want a period from it, an hour long", res)
		}
		clk.SetTime(first.Add(time.Hour - time.Millisecond))
		if res := charge(t, s, p, 1); res.Allowed || res.Credits.RefillAfter != time.Millisecond {
			t.Errorf("a millisecond before the refill: %+v, want exhausted for a millisecond", res)
		}
		clk.SetTime(first.Add(5*time.Hour + time.Minute))
		res := charge(t, s, p, 1)
		if !res.Allowed || res.Credits.Remaining != 1 || !res.Credits.RefillAt.Equal(first.Add(6*time.Hour)) {
			t.Errorf("five periods on: %+v, want refilled, refilling at %s", res, first.Add(6*time.Hour))
		}
		if b := balanceOf(t, s, p, clk); b.Used != 1 || !b.Period.Start.Equal(first.Add(5*time.Hour)) {
			t.Errorf("balance %+v, want 1 used in the period from %s", b, first.Add(5*time.Hour))
		}
	})
}

// TestCreditsRefillAtMonthEndsAndDST: the first request after a boundary sees the whole
// balance, at month ends and across DST changes, in both stores.
func TestCreditsRefillAtMonthEndsAndDST(t *testing.T) {
	for _, c := range []struct {
		name, zone       string
		refill           Refill
		day              int
		last, firstOfNew string // local: the period's last minute, the next one's first instant
	}{
		{"31st into February", "UTC", Monthly, 31, "2026-02-27 23:59", "2026-02-28 00:00"},
		{"31st into a 30-day month", "UTC", Monthly, 31, "2026-04-29 23:59", "2026-04-30 00:00"},
		{"30th on a leap day", "UTC", Monthly, 30, "2028-02-28 23:59", "2028-02-29 00:00"},
		{"29th in a leap year", "America/New_York", Monthly, 29, "2028-02-28 23:59", "2028-02-29 00:00"},
		{"29th in a common year", "America/New_York", Monthly, 29, "2027-02-27 23:59", "2027-02-28 00:00"},
		{"a 23-hour day in Paris", "Europe/Paris", Daily, 0, "2026-03-29 23:59", "2026-03-30 00:00"},
		{"a 25-hour day in New York", "America/New_York", Daily, 0, "2026-11-01 23:59", "2026-11-02 00:00"},
		{"monthly across the autumn change in Paris", "Europe/Paris", Monthly, 1, "2026-10-31 23:59", "2026-11-01 00:00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			onEachStore(t, at(t, c.zone, c.last), func(t *testing.T, s Store, clk *clocktesting.FakePassiveClock) {
				p := creditsPolicy(t, unlimited, Credits{Amount: 3, Schedule: schedule(t, c.refill, c.zone, 0, c.day)})
				boundary := at(t, c.zone, c.firstOfNew)
				charge(t, s, p, 3)
				clk.SetTime(boundary.Add(-time.Nanosecond))
				if res := charge(t, s, p, 1); res.Allowed || res.RetryAfter != time.Nanosecond {
					t.Fatalf("the last nanosecond: %+v, want exhausted for a nanosecond", res)
				}
				clk.SetTime(boundary)
				if res := charge(t, s, p, 1); !res.Allowed || res.Credits.Remaining != 2 || !res.Credits.RefillAt.After(boundary) {
					t.Errorf("the first request at %s: %+v, want 2 of 3 left", boundary, res)
				}
			})
		})
	}
}

// TestMemoryCreditsLateDecrement is TestRedisCreditsLateDecrement's first part in memory, with
// a rollover: a late charge on the previous period changes nothing of the new one.
func TestMemoryCreditsLateDecrement(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(at(t, "UTC", "2026-06-10 12:00"))
	m := NewMemory(clk)
	s := schedule(t, Hourly, "UTC", 0, 0)
	p := creditsPolicy(t, unlimited, Credits{Amount: 5, Cap: 20, Schedule: s})
	previous := s.Period(clk.Now())
	charge(t, m, p, 1)
	clk.SetTime(previous.End)
	if res := charge(t, m, p, 1); res.Credits.Remaining != 8 { // 5 + 4 carried, 1 spent
		t.Fatalf("the new period: %+v, want 8 left", res)
	}
	late := m.creditShard(p).allowWithCredits(p, 3, clk.Now(), &previous)
	if !late.Allowed || late.Credits.Remaining != 1 {
		t.Errorf("the late request: %+v, want charged on the previous period, 1 left of it", late)
	}
	if b := balanceOf(t, m, p, clk); b.Allowance != 9 || b.Remaining != 8 {
		t.Errorf("the new period after the late request: %+v, want its allowance of 9, 8 left", b)
	}
}

// TestCreditStoresAgree runs one random sequence of charges, refunds and clock moves on both
// stores: the script in Redis and settle/take in Go decide every request alike.
func TestCreditStoresAgree(t *testing.T) {
	srv := testenv.StartRedis(t)
	start := at(t, "Europe/Paris", "2026-03-28 22:00")
	memClk, redisClk := clocktesting.NewFakePassiveClock(start), clocktesting.NewFakePassiveClock(start)
	mem, red := New(Options{Clock: memClk, Logger: logr.Discard()}), New(Options{Remote: newRedisOn(t, srv.URL(), redisClk), Clock: redisClk, Timeout: 10 * time.Second, Logger: logr.Discard()})
	every, err := NewIntervalSchedule(90 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []Credits{
		{Amount: 7, Cap: 30, Schedule: schedule(t, Hourly, "Europe/Paris", 0, 0), Grants: []Grant{{ID: "a", Amount: 9, ExpiresAt: start.Add(20 * time.Hour)}, {ID: "b", Amount: 4}}},
		{Amount: 20, Schedule: schedule(t, Daily, "Europe/Paris", 0, 0), Grants: []Grant{{ID: "c", Amount: 15, ExpiresAt: start.Add(30 * time.Hour)}}},
		{Amount: 5, Cap: 12, Schedule: every},
	} {
		rnd := rand.New(rand.NewPCG(41, uint64(c.Amount)))
		p, err := NewCreditPolicy(fmt.Sprintf("uid-agree-%d", i), unlimited, c)
		if err != nil {
			t.Fatal(err)
		}
		memClk.SetTime(start)
		redisClk.SetTime(start)
		for step := range 600 {
			if rnd.IntN(4) == 0 {
				step := time.Duration(rnd.IntN(150)) * time.Minute
				memClk.SetTime(memClk.Now().Add(step))
				redisClk.SetTime(redisClk.Now().Add(step))
			}
			cost := int64(1 + rnd.IntN(6))
			md, rd := mem.Allow(context.Background(), p, cost), red.Allow(context.Background(), p, cost)
			if md.Allowed != rd.Allowed || md.Credits.Remaining != rd.Credits.Remaining || !md.Credits.RefillAt.Equal(rd.Credits.RefillAt) ||
				md.Credits.Charged.Total() != rd.Credits.Charged.Total() || rd.Store != StoreRedis {
				t.Fatalf("%s, step %d, cost %d: memory %+v, Redis %+v", c.Schedule.Kind(), step, cost, md, rd)
			}
			if md.Allowed && rnd.IntN(5) == 0 {
				if err := mem.Refund(context.Background(), p, md); err != nil {
					t.Fatal(err)
				}
				if err := red.Refund(context.Background(), p, rd); err != nil {
					t.Fatal(err)
				}
			}
		}
		mb, _, err1 := mem.Balance(context.Background(), p)
		rb, _, err2 := red.Balance(context.Background(), p)
		if err1 != nil || err2 != nil || mb != rb {
			t.Errorf("%s: balances differ: memory %+v (%v), Redis %+v (%v)", c.Schedule.Kind(), mb, err1, rb, err2)
		}
	}
}
