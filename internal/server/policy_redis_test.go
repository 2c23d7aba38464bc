//go:build !unit

package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// remaining reads r from a RateLimit field, or -1.
func remaining(resp response) int {
	v := resp.Header.Get("RateLimit")
	_, after, ok := strings.Cut(v, ";r=")
	if !ok {
		return -1
	}
	r, _, _ := strings.Cut(after, ";")
	n, err := strconv.Atoi(r)
	if err != nil {
		return -1
	}
	return n
}

// TestKeyRateLimitSharedOnRedis: two server instances on one Redis share each key's budget
// exactly, and a key recovers after its period.
func TestKeyRateLimitSharedOnRedis(t *testing.T) {
	doc := loadDocument(t)
	redis := testenv.StartRedis(t)
	ns := env.Namespace(t, "redis")
	newConnection(t, ns, "a", "conn_a", nil)
	hourly := newKey(t, ns, "hourly", rateLimited(6, time.Hour))
	c := noFailureLimit(&sc{RateLimitRedis: configv1alpha1.RateLimitRedis{URL: redis.URL()}})
	a, b := startServer(t, nil, c, Deps{}, true), startServer(t, nil, c, Deps{}, true)

	// An hour for 6 requests: nothing comes back while the test runs, however slow.
	wantLimit(t, "1st, on a", firstAnswer(t, a, hourly.Key, nil), http.StatusOK, `"apikey";q=6;w=3600`, `"apikey";r=5;t=600`)
	if got := remaining(firstAnswer(t, b, hourly.Key, nil)); got != 4 {
		t.Fatalf("2nd, on b: remaining %d, want 4 (one budget for both)", got)
	}
	allowed := 0
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		resp := s.get(t, "/v1/connections", hourly.Key)
		switch resp.Status {
		case http.StatusOK:
			allowed++
			if got, want := remaining(resp), 4-allowed; got != want {
				t.Errorf("request %d: remaining %d, want %d", i+3, got, want)
			}
		case http.StatusTooManyRequests:
			retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			if resp.errorCode(t) != apicode.KeyRateLimited || retry < 1 || retry > 600 || resp.Header.Get("RateLimit") != fmt.Sprintf(`"apikey";r=0;t=%d`, retry) {
				t.Errorf("request %d: %s, Retry-After %q, RateLimit %q", i+3, resp.Body, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"))
			}
			if err := doc.checkResponse("/v1/connections", "GET", resp); err != nil {
				t.Error(err)
			}
		default:
			t.Fatalf("request %d: %d %s", i+3, resp.Status, resp.Body)
		}
	}
	if allowed != 4 {
		t.Errorf("after 2 requests, the two servers admitted %d more, want exactly the 4 left of 6", allowed)
	}

	// 2 per second: spend it on a, wait Retry-After, and b admits again.
	fast := newKey(t, ns, "fast", rateLimited(2, time.Second))
	firstAnswer(t, a, fast.Key, nil)
	firstAnswer(t, b, fast.Key, nil)
	var over response
	for range 10 {
		if over = a.get(t, "/v1/connections", fast.Key); over.Status == http.StatusTooManyRequests {
			break
		}
	}
	if over.Status != http.StatusTooManyRequests || over.Header.Get("Retry-After") != "1" || over.Header.Get("RateLimit") != `"apikey";r=0;t=1` {
		t.Fatalf("2 per second, past it: %d, Retry-After %q, RateLimit %q", over.Status, over.Header.Get("Retry-After"), over.Header.Get("RateLimit"))
	}
	time.Sleep(time.Second)
	if resp := b.get(t, "/v1/connections", fast.Key); resp.Status != http.StatusOK {
		t.Errorf("after Retry-After: %d %s, want 200", resp.Status, resp.Body)
	}
}

// TestKeyRateLimitRedisStoppedMidLoad stops Redis while two servers serve a limited key: every
// request under the limit is still served (decided in memory, per server), the fallback is
// counted, and once Redis is back the budget is shared again.
func TestKeyRateLimitRedisStoppedMidLoad(t *testing.T) {
	redis := testenv.StartRedis(t)
	ns := env.Namespace(t, "redisdown")
	newConnection(t, ns, "a", "conn_a", nil)
	// A day for 100000: one request comes back every 0.864 s, so three quick requests see exact
	// decrements, and 1200 stay far under the limit.
	k := newKey(t, ns, "busy", rateLimited(100_000, 24*time.Hour))
	c := noFailureLimit(&sc{RateLimitRedis: configv1alpha1.RateLimitRedis{URL: redis.URL()}})
	a, b := startServer(t, nil, c, Deps{}, true), startServer(t, nil, c, Deps{}, true)
	firstAnswer(t, a, k.Key, nil)
	firstAnswer(t, b, k.Key, nil)
	fallbacksBefore := metricValue(t, "switchboard_api_rate_limit_fallbacks_total", "", "")

	var wg sync.WaitGroup
	statuses := make(chan int, 4*300)
	stopped := make(chan struct{})
	for w := range 4 {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for i := range 300 {
				if i == 100 {
					<-stopped
				}
				statuses <- s.get(t, "/v1/connections", k.Key).Status
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	redis.Stop()
	close(stopped)
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[http.StatusOK] != 1200 {
		t.Errorf("with Redis stopped mid-load: %v, want all 1200 requests answered 200", counts)
	}
	if got := metricValue(t, "switchboard_api_rate_limit_fallbacks_total", "", "") - fallbacksBefore; got < 800 {
		t.Errorf("fallbacks grew by %v, want at least the 800 requests made after Redis stopped", got)
	}

	// Back: after RemoteRetry, both servers decide in Redis again, from one budget: a, b, a
	// take three consecutive requests (in memory, a's second would be one less than its first).
	redis.Start()
	testenv.Eventually(t, 30*time.Second, "one budget again", func() error {
		r1 := remaining(a.get(t, "/v1/connections", k.Key))
		r2 := remaining(b.get(t, "/v1/connections", k.Key))
		r3 := remaining(a.get(t, "/v1/connections", k.Key))
		if r2 != r1-1 || r3 != r1-2 {
			return fmt.Errorf("remaining on a, b, a: %d, %d, %d", r1, r2, r3)
		}
		return nil
	})
}
