package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func policy(t testing.TB, id string, requests int64, period time.Duration, burst int64) *Policy {
	t.Helper()
	p, err := NewPolicy(id, Limit{Requests: requests, Period: period, Burst: burst})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// spend makes n requests of p's key in s and returns how many were allowed and the last result.
func spend(t testing.TB, s Store, p *Policy, n int) (int, Result) {
	t.Helper()
	allowed := 0
	var last Result
	for range n {
		res, err := s.Allow(context.Background(), p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			allowed++
		}
		last = res
	}
	return allowed, last
}

func TestMemoryBudgetAndRecovery(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	m := NewMemory(clk)
	p := policy(t, "key-a", 5, 10*time.Second, 5)

	if n, last := spend(t, m, p, 5); n != 5 || last.Remaining != 0 {
		t.Fatalf("a fresh key got %d of 5 (last %+v)", n, last)
	}
	n, last := spend(t, m, p, 3)
	if n != 0 || last.RetryAfter != 2*time.Second || last.ResetAfter != 10*time.Second {
		t.Fatalf("past the budget: %d allowed, last %+v; want none, retry after 2s, reset after 10s", n, last)
	}

	clk.SetTime(clk.Now().Add(2 * time.Second))
	if n, _ := spend(t, m, p, 3); n != 1 {
		t.Errorf("2s later (one interval): %d allowed, want 1", n)
	}

	clk.SetTime(clk.Now().Add(10 * time.Second))
	if n, _ := spend(t, m, p, 8); n != 5 {
		t.Errorf("a period later: %d allowed, want the whole budget of 5", n)
	}

	other := policy(t, "key-b", 5, 10*time.Second, 5)
	if n, _ := spend(t, m, other, 5); n != 5 {
		t.Errorf("another key got %d of its 5: budgets are per key", n)
	}
}

func TestMemoryConcurrentExactBurst(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	m := NewMemory(clk)
	p := policy(t, "key", 1000, time.Hour, 100)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if res, _ := m.Allow(context.Background(), p, 1); res.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 100 {
		t.Errorf("400 concurrent requests: %d allowed, want exactly the burst of 100", got)
	}
}

func TestMemorySweep(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	m := NewMemory(clk)
	spend(t, m, policy(t, "short", 10, time.Second, 10), 10)
	spend(t, m, policy(t, "long", 10, time.Hour, 10), 1)
	m.Sweep()
	if m.Len() != 2 {
		t.Fatalf("swept keys still in use: %d left, want 2", m.Len())
	}
	clk.SetTime(clk.Now().Add(time.Second))
	m.Sweep()
	if m.Len() != 1 {
		t.Errorf("after 1s the rested key should be forgotten: %d left, want 1", m.Len())
	}
	if n, _ := spend(t, m, policy(t, "short", 10, time.Second, 10), 11); n != 10 {
		t.Errorf("a forgotten key got %d, want its whole budget of 10", n)
	}
}
