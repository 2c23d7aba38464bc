package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

func TestCreditShare(t *testing.T) {
	for _, c := range []struct {
		amount   int64
		replicas int
		want     int64
	}{
		{100, 0, 100}, {100, 1, 100}, {100, 2, 50}, {100, 3, 33}, {99, 3, 33}, {2, 3, 1}, {1, 1000, 1},
		{MaxCredits, 1000, MaxCredits / 1000},
	} {
		if got := CreditShare(c.amount, c.replicas); got != c.want {
			t.Errorf("CreditShare(%d, %d) = %d, want %d", c.amount, c.replicas, got, c.want)
		}
		if c.replicas > 1 && c.amount >= int64(c.replicas) && CreditShare(c.amount, c.replicas)*int64(c.replicas) > c.amount {
			t.Errorf("%d replicas with their shares of %d admit more than it", c.replicas, c.amount)
		}
	}
}

// TestLimiterCreditReplicasInMemory: without Redis, each of 3 replicas admits its share of a
// period (33 of 100), never more, and the whole share again in the next period; 3 replicas
// together stay under the amount, a 4th running adds its share (the documented overshoot).
func TestLimiterCreditReplicasInMemory(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC))
	p := creditPolicy(t, "uid-shares", unlimited, 100, schedule(t, Monthly, "UTC", 0, 1))
	replicas := make([]*Limiter, 4)
	for i := range replicas {
		replicas[i] = New(Options{Clock: clk, CreditReplicas: 3, Logger: logr.Discard()})
	}
	admitted := func(l *Limiter) int64 {
		return hammer(t, func(ctx context.Context, p *Policy, cost int64) (Result, error) {
			return l.Allow(ctx, p, cost).Result, nil
		}, p, 4, 200)
	}
	if got := admitted(replicas[0]); got != 33 {
		t.Fatalf("one replica of 3 admitted %d of 100 credits, want its share, 33", got)
	}
	d := replicas[0].Allow(context.Background(), p, 1)
	if d.Allowed || !d.Credits.Exhausted || d.Credits.Remaining != 0 || d.Store != StoreMemory || d.Degraded {
		t.Errorf("past its share: %+v, want exhausted in memory, not degraded", d)
	}
	total := int64(33)
	for _, l := range replicas[1:3] {
		total += admitted(l)
	}
	if total != 99 {
		t.Errorf("3 replicas admitted %d of 100, want 99 (3 × 33)", total)
	}
	if extra := admitted(replicas[3]); total+extra != 132 {
		t.Errorf("a 4th replica admitted %d more, want 33: the overshoot is (running − replicas) × share", extra)
	}

	clk.SetTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) // the refill
	if got := admitted(replicas[0]); got != 33 {
		t.Errorf("in the next period one replica admitted %d, want its share again, 33", got)
	}
}

// TestLimiterCreditReplicasNotWithRedis: a Redis that answers counts every replica's requests
// exactly, so the share does not apply.
func TestLimiterCreditReplicasNotWithRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	l := New(Options{Remote: newRedis(t, srv.URL(), ""), CreditReplicas: 4, Logger: logr.Discard()})
	p := creditPolicy(t, "uid-shares-redis", unlimited, 10, schedule(t, Daily, "UTC", 0, 0))
	if got := hammer(t, func(ctx context.Context, p *Policy, cost int64) (Result, error) {
		return l.Allow(ctx, p, cost).Result, nil
	}, p, 2, 30); got != 10 {
		t.Errorf("with Redis, %d of 10 credits admitted, want all 10", got)
	}
}

// TestLimiterCreditsCountInMemoryRedisStoppedMidLoad stops Redis while two replicas decide a
// key's credits with CountInMemory: no request is refused for Redis's sake, each replica then
// admits exactly its share (50 of 100) from its own memory, and the total is what Redis admitted
// before the stop plus the replicas' shares, never more. Once Redis answers again, it decides.
func TestLimiterCreditsCountInMemoryRedisStoppedMidLoad(t *testing.T) {
	srv := testenv.StartRedis(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	var log lines
	p := creditPolicy(t, "uid-count-in-memory", unlimited, 100, schedule(t, Daily, "UTC", 0, 0))
	replicas := []*Limiter{
		New(Options{Remote: newRedis(t, srv.URL(), ""), Clock: clk, Logger: log.logger(), CreditsOnRedisFailure: CreditsCountInMemory, CreditReplicas: 2}),
		New(Options{Remote: newRedis(t, srv.URL(), ""), Clock: clk, Logger: log.logger(), CreditsOnRedisFailure: CreditsCountInMemory, CreditReplicas: 2}),
	}
	fallbacksBefore, refusedBefore := testutil.ToFloat64(creditFallbacks), testutil.ToFloat64(creditsRefused)

	const perWorker = 60
	results := make(chan Decision, 2*2*perWorker)
	stopped := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range replicas {
		for range 2 {
			wg.Go(func() {
				for i := range perWorker {
					if i == 5 {
						<-stopped // every worker has been answered by Redis before it stops
					}
					results <- l.Allow(context.Background(), p, 1)
				}
			})
		}
	}
	time.Sleep(10 * time.Millisecond)
	srv.Stop()
	close(stopped)
	wg.Wait()
	close(results)

	var byRedis, byMemory, inMemory int64
	for d := range results {
		switch {
		case d.Credits.Unavailable:
			t.Errorf("refused for Redis's sake with CountInMemory: %+v", d)
		case d.Store == StoreRedis && d.Allowed:
			byRedis++
		case d.Store == StoreMemory:
			inMemory++
			if !d.Degraded {
				t.Errorf("a decision in memory with Redis configured is not marked degraded: %+v", d)
			}
			if d.Allowed {
				byMemory++
			}
		}
	}
	if byRedis < 4*5 || byRedis > 100 {
		t.Errorf("Redis admitted %d before it stopped, want 20 to 100", byRedis)
	}
	if byMemory != 2*50 {
		t.Errorf("the replicas admitted %d in memory, want each its share: 2 × 50", byMemory)
	}
	if total := byRedis + byMemory; total > byRedis+100 {
		t.Errorf("%d admitted in all", total)
	}
	if got := testutil.ToFloat64(creditFallbacks) - fallbacksBefore; got != float64(inMemory) {
		t.Errorf("credits fallbacks grew by %v, want %d", got, inMemory)
	}
	if got := testutil.ToFloat64(creditsRefused) - refusedBefore; got != 0 {
		t.Errorf("credits refusals grew by %v with CountInMemory", got)
	}
	if n := log.matching(`"creditsOnRedisFailure"="CountInMemory"`); n != 2 {
		t.Errorf("%d lines about Redis naming the credits' mode, want one per replica: %v", n, log.all)
	}

	srv.Start()
	testenv.Eventually(t, 10*time.Second, "Redis decides again", func() error {
		clk.SetTime(clk.Now().Add(RemoteRetry))
		if d := replicas[0].Allow(context.Background(), p, 1); d.Store != StoreRedis || d.Degraded {
			return fmt.Errorf("decided by %s, degraded %v", d.Store, d.Degraded)
		}
		return nil
	})
}

// TestLimiterCreditsMemoryCountDoesNotMergeBack: what a replica counted in memory while Redis
// was paused is not added to Redis's count when it answers again (Redis keeps its data through
// a pause, unlike the restart above): Redis goes on from where it stopped.
func TestLimiterCreditsMemoryCountDoesNotMergeBack(t *testing.T) {
	srv := testenv.StartRedis(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	l := New(Options{Remote: newRedis(t, srv.URL(), ""), Clock: clk, Logger: logr.Discard(), CreditsOnRedisFailure: CreditsCountInMemory})
	p := creditPolicy(t, "uid-no-merge", unlimited, 100, schedule(t, Daily, "UTC", 0, 0))
	for range 10 {
		if d := l.Allow(context.Background(), p, 1); !d.Allowed || d.Store != StoreRedis {
			t.Fatalf("with Redis up: %+v", d)
		}
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = admin.Close() }()
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "300", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		// The first waits out the timeout; the next ones skip Redis for RemoteRetry.
		if d := l.Allow(context.Background(), p, 1); !d.Allowed || d.Store != StoreMemory || !d.Degraded || d.Credits.Remaining != 100-int64(i)-1 {
			t.Fatalf("request %d with Redis paused: %+v, want admitted from memory, counted from 0 there", i, d)
		}
	}
	testenv.Eventually(t, 10*time.Second, "Redis decides again", func() error {
		clk.SetTime(clk.Now().Add(RemoteRetry))
		d := l.Allow(context.Background(), p, 1)
		if d.Store != StoreRedis {
			return fmt.Errorf("decided by %s", d.Store)
		}
		if d.Credits.Remaining != 100-11 {
			t.Errorf("Redis's first answer after the pause: %d remaining, want 89 (its own 10 and this one, not the 5 of memory)", d.Credits.Remaining)
		}
		return nil
	})
}

// TestLimiterCreditsRefusedAreCounted: the default refuses keys with credits while Redis fails,
// and counts each refusal.
func TestLimiterCreditsRefusedAreCounted(t *testing.T) {
	srv := testenv.StartRedis(t)
	l := New(Options{Remote: newRedis(t, srv.URL(), ""), Logger: logr.Discard(), CreditReplicas: 3})
	p := creditPolicy(t, "uid-refused-counted", unlimited, 100, schedule(t, Daily, "UTC", 0, 0))
	srv.Stop()
	before := testutil.ToFloat64(creditsRefused)
	for range 3 {
		if d := l.Allow(context.Background(), p, 1); d.Allowed || !d.Credits.Unavailable {
			t.Errorf("with Redis down and the default mode: %+v, want refused, unavailable", d)
		}
	}
	if got := testutil.ToFloat64(creditsRefused) - before; got != 3 {
		t.Errorf("credits refusals grew by %v, want 3", got)
	}
}
