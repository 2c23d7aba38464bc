package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

func poolPolicy(t testing.TB, id, pool string, l Limit, amount int64, s Schedule) *Policy {
	t.Helper()
	p, err := NewPoolCreditPolicy(id, pool, l, Credits{Amount: amount, Schedule: s})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPoolCreditsSharedExactly: two keys of one pool, hammered at once, are admitted exactly the
// pool's amount between them, in memory and in Redis, and a key of another pool counts apart.
func TestPoolCreditsSharedExactly(t *testing.T) {
	srv := testenv.StartRedis(t)
	clk := clocktesting.NewFakePassiveClock(time.Now()) // Redis expires a count on its own clock
	daily := schedule(t, Daily, "UTC", 0, 0)
	for name, s := range map[string]Store{"memory": NewMemory(clk), "redis": newRedisOn(t, srv.URL(), clk)} {
		t.Run(name, func(t *testing.T) {
			pool := "uid-pool-" + name
			a := poolPolicy(t, "uid-a-"+name, pool, unlimited, 500, daily)
			b := poolPolicy(t, "uid-b-"+name, pool, unlimited, 500, daily)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for _, p := range []*Policy{a, b} {
				wg.Go(func() { admitted.Add(hammer(t, s.Allow, p, 16, 1000)) })
			}
			wg.Wait()
			if got := admitted.Load(); got != 500 {
				t.Errorf("two keys of a pool of 500, 2,000 attempts: %d admitted, want exactly 500", got)
			}
			rec, err := s.record(context.Background(), b)
			if bal := b.balance(rec, clk.Now()); err != nil || bal.Used != 500 {
				t.Errorf("the pool's count read through key b: %d, %v; want 500", bal.Used, err)
			}
			if n, _ := spend(t, s, poolPolicy(t, "uid-c-"+name, "uid-other-pool-"+name, unlimited, 500, daily), 3); n != 3 {
				t.Errorf("a key of another pool: %d of 3 admitted", n)
			}
		})
	}
}

// TestPoolKeysKeepTheirOwnRate: a key of a pool that spent its rate leaves the other key's rate
// whole, and its refusal costs the pool nothing.
func TestPoolKeysKeepTheirOwnRate(t *testing.T) {
	srv := testenv.StartRedis(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	daily := schedule(t, Daily, "UTC", 0, 0)
	rate := Limit{Requests: 2, Period: time.Hour, Burst: 2}
	for name, s := range map[string]Store{"memory": NewMemory(clk), "redis": newRedisOn(t, srv.URL(), clk)} {
		t.Run(name, func(t *testing.T) {
			pool := "uid-rate-pool-" + name
			a := poolPolicy(t, "uid-rate-a-"+name, pool, rate, 100, daily)
			b := poolPolicy(t, "uid-rate-b-"+name, pool, rate, 100, daily)
			if n, last := spend(t, s, a, 5); n != 2 || last.Credits.Exhausted {
				t.Fatalf("key a, rate 2: %d of 5 admitted (last %+v)", n, last)
			}
			if n, last := spend(t, s, b, 2); n != 2 || last.Credits.Remaining != 96 {
				t.Errorf("key b after a spent its rate: %d of 2 admitted, %d credits left; want 2 and 96", n, last.Credits.Remaining)
			}
		})
	}
}

// TestLimiterBalanceOfAPool: the balance read through any key of a pool is the pool's.
func TestLimiterBalanceOfAPool(t *testing.T) {
	l := New(Options{Logger: logr.Discard()})
	daily := schedule(t, Daily, "UTC", 0, 0)
	a := poolPolicy(t, "uid-bal-a", "uid-bal-pool", unlimited, 10, daily)
	b := poolPolicy(t, "uid-bal-b", "uid-bal-pool", unlimited, 10, daily)
	for range 4 {
		l.Allow(context.Background(), a, 1)
	}
	if bal, ok, err := l.Balance(context.Background(), b); !ok || err != nil || bal.Used != 4 || bal.Remaining != 6 {
		t.Errorf("the balance through key b: %+v, %v, %v; want 4 used, 6 left", bal, ok, err)
	}
}

func TestNewPoolCreditPolicyNeedsThePool(t *testing.T) {
	if _, err := NewPoolCreditPolicy("uid", "", unlimited, Credits{Amount: 1, Schedule: schedule(t, Daily, "UTC", 0, 0)}); err == nil {
		t.Error("a pool's policy without the pool's ID was built")
	}
}
