package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// lines records a logger's lines.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.all = append(l.all, prefix+" "+args)
	}, funcr.Options{})
}

func (l *lines) matching(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.all {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func TestLimiterMemoryOnly(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	l := New(Options{Clock: clk})
	p := policy(t, "uid-memory", 2, time.Minute, 2)
	before := testutil.ToFloat64(limitedMemory)
	for i, wantAllowed := range []bool{true, true, false} {
		d := l.Allow(context.Background(), p, 1)
		if d.Allowed != wantAllowed || d.Store != StoreMemory || d.Degraded {
			t.Errorf("request %d: %+v, want allowed=%v from memory, not degraded", i, d, wantAllowed)
		}
	}
	if got := testutil.ToFloat64(limitedMemory) - before; got != 1 {
		t.Errorf("switchboard_api_rate_limited_total{store=memory} grew by %v, want 1", got)
	}
}

// TestLimiterRedisStoppedMidLoad stops Redis while requests are being decided: none fails,
// each replica then limits on its own, and once Redis is back (and RemoteRetry has passed) the
// decisions are Redis's again.
func TestLimiterRedisStoppedMidLoad(t *testing.T) {
	srv := testenv.StartRedis(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	var log lines
	l := New(Options{Remote: newRedis(t, srv.URL(), ""), Timeout: DefaultRedisTimeout, Clock: clk, Logger: log.logger()})
	p := policy(t, "uid-midload", 1000, time.Hour, 1000)
	fallbacksBefore, errorsBefore := testutil.ToFloat64(fallbacks), testutil.ToFloat64(storeErrors)+testutil.ToFloat64(storeTimeouts)

	var wg sync.WaitGroup
	results := make(chan Decision, 4*200)
	stopped := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for i := range 200 {
				if i == 50 {
					<-stopped // every worker has seen Redis before it stops
				}
				results <- l.Allow(context.Background(), p, 1)
			}
		})
	}
	// Stop Redis once each worker has made some requests through it.
	time.Sleep(10 * time.Millisecond)
	srv.Stop()
	close(stopped)
	wg.Wait()
	close(results)

	byStore := map[string]int{}
	allowed := 0
	for d := range results {
		byStore[d.Store]++
		if d.Allowed {
			allowed++
		}
		if d.Store == StoreMemory && !d.Degraded {
			t.Errorf("a decision in memory with Redis configured is not marked degraded: %+v", d)
		}
	}
	if byStore[StoreMemory] < 4*150 {
		t.Errorf("after Redis stopped, %d decisions came from memory, want at least 600 (%v)", byStore[StoreMemory], byStore)
	}
	if allowed != 800 {
		t.Errorf("%d of 800 requests under the limit were allowed; a Redis outage must not refuse them", allowed)
	}
	if !l.Degraded() {
		t.Error("the limiter does not say it is degraded")
	}
	if got := testutil.ToFloat64(fallbacks) - fallbacksBefore; got != float64(byStore[StoreMemory]) {
		t.Errorf("fallbacks metric grew by %v, want %d", got, byStore[StoreMemory])
	}
	if got := testutil.ToFloat64(storeErrors) + testutil.ToFloat64(storeTimeouts) - errorsBefore; got < 1 {
		t.Errorf("store errors grew by %v, want at least 1", got)
	}
	if n := log.matching("did not answer"); n != 1 {
		t.Errorf("%d log lines about Redis, want exactly 1 (rate-limited): %v", n, log.all)
	}

	// Memory now limits this replica on its own: the rest of the burst, counted here alone.
	if d := l.Allow(context.Background(), p, 1); d.Store != StoreMemory || !d.Degraded {
		t.Errorf("with Redis down: %+v, want a degraded decision from memory", d)
	}

	srv.Start()
	// Within RemoteRetry, memory still decides without trying Redis.
	if d := l.Allow(context.Background(), p, 1); d.Store != StoreMemory {
		t.Errorf("within RemoteRetry of the failure: decided by %s, want memory", d.Store)
	}
	clk.SetTime(clk.Now().Add(RemoteRetry))
	testenv.Eventually(t, 10*time.Second, "Redis decides again", func() error {
		clk.SetTime(clk.Now().Add(RemoteRetry))
		if d := l.Allow(context.Background(), p, 1); d.Store != StoreRedis || d.Degraded {
			return fmt.Errorf("decided by %s, degraded %v", d.Store, d.Degraded)
		}
		return nil
	})
	if l.Degraded() || log.matching("answers again") != 1 {
		t.Errorf("after Redis came back: degraded %v, %d recovery lines; want false and 1", l.Degraded(), log.matching("answers again"))
	}
}

// TestLimiterSlowRedis pauses Redis (CLIENT PAUSE, as a Redis stuck on a slow command would be):
// the request is decided in memory after the timeout, counted as a timeout.
func TestLimiterSlowRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	l := New(Options{Remote: newRedis(t, srv.URL(), ""), Timeout: DefaultRedisTimeout, Clock: clk, Logger: logr.Discard()})
	p := policy(t, "uid-slow", 10, time.Minute, 10)
	if d := l.Allow(context.Background(), p, 1); d.Store != StoreRedis {
		t.Fatalf("before the pause: decided by %s, want redis", d.Store)
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = admin.Close() }()
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "2000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	timeouts := testutil.ToFloat64(storeTimeouts)
	d := l.Allow(context.Background(), p, 1)
	if d.Store != StoreMemory || !d.Degraded || !d.Allowed {
		t.Errorf("with Redis paused: %+v, want allowed, degraded, from memory", d)
	}
	if got := testutil.ToFloat64(storeTimeouts) - timeouts; got != 1 {
		t.Errorf("timeouts grew by %v, want 1", got)
	}
}

// TestLimiterClientGone: a request whose client left while Redis decided does not count
// against Redis.
func TestLimiterClientGone(t *testing.T) {
	srv := testenv.StartRedis(t)
	l := New(Options{Remote: newRedis(t, srv.URL(), ""), Logger: logr.Discard()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.Allow(ctx, policy(t, "uid-gone", 10, time.Minute, 10), 1)
	if l.Degraded() {
		t.Error("a cancelled request made the limiter skip Redis")
	}
}
