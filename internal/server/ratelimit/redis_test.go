package ratelimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

func newRedis(t testing.TB, url, password string) *Redis {
	t.Helper()
	r, err := NewRedis(RedisOptions{URL: url, Password: password, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestRedisSharedBudget is two replicas (two clients) on one Redis: together they admit exactly
// the key's burst, then both refuse.
func TestRedisSharedBudget(t *testing.T) {
	srv := testenv.StartRedis(t)
	a, b := newRedis(t, srv.URL(), ""), newRedis(t, srv.URL(), "")
	// An hour per 10 requests: no budget comes back while the test runs, however slow it is.
	p := policy(t, "uid-shared", 10, time.Hour, 10)
	allowed := 0
	var last Result
	for i := range 16 {
		s := a
		if i%2 == 1 {
			s = b
		}
		res, err := s.Allow(context.Background(), p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			allowed++
			if want := int64(10 - allowed); res.Remaining != want {
				t.Errorf("request %d: remaining %d, want %d", i, res.Remaining, want)
			}
		}
		last = res
	}
	if allowed != 10 {
		t.Fatalf("two replicas admitted %d, want exactly the budget of 10", allowed)
	}
	// Redis's clock runs during the test, so retry and reset are a little under 6 min and 1 h.
	if last.Allowed || last.RetryAfter <= 5*time.Minute || last.RetryAfter > 6*time.Minute || last.ResetAfter <= 59*time.Minute || last.ResetAfter > time.Hour {
		t.Errorf("past the budget: %+v, want refused, retry after ≤ 6m, reset after ≤ 1h", last)
	}
	if other, _ := spend(t, a, policy(t, "uid-other", 10, time.Hour, 10), 10); other != 10 {
		t.Errorf("another key got %d of its 10", other)
	}
}

// TestRedisRecovers waits (Redis keeps its own clock) until the budget is whole again.
func TestRedisRecovers(t *testing.T) {
	srv := testenv.StartRedis(t)
	r := newRedis(t, srv.URL(), "")
	p := policy(t, "uid-recovers", 3, time.Second, 3)
	n, _ := spend(t, r, p, 3)
	if n != 3 {
		t.Fatalf("a fresh key got %d of 3", n)
	}
	res, err := r.Allow(context.Background(), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Whether the 4th passed depends on how fast this machine is (a third of a second brings a
	// request back); TestRedisSharedBudget checks the refusal. Here: after ResetAfter, all is back.
	time.Sleep(res.ResetAfter + 10*time.Millisecond)
	if n, _ := spend(t, r, p, 3); n != 3 {
		t.Errorf("after ResetAfter the key got %d, want its whole budget of 3", n)
	}
}

func TestRedisPassword(t *testing.T) {
	srv := testenv.StartRedis(t, "--requirepass", "s3cret-from-a-Secret")
	p := policy(t, "uid-auth", 5, time.Minute, 5)
	if n, _ := spend(t, newRedis(t, srv.URL(), "s3cret-from-a-Secret"), p, 1); n != 1 {
		t.Errorf("with the password: %d allowed, want 1", n)
	}
	_, err := newRedis(t, srv.URL(), "").Allow(context.Background(), p, 1)
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("without the password: %v, want a NOAUTH error", err)
	}
}

func TestNewRedisRefusesBadOptions(t *testing.T) {
	for _, o := range []RedisOptions{
		{URL: "http://127.0.0.1:6379", Timeout: time.Second},
		{URL: "redis://:hunter2@127.0.0.1:port", Timeout: time.Second},
		{URL: "redis://user:hunter2@127.0.0.1:6379/x", Timeout: time.Second},
		{URL: "redis://127.0.0.1:6379", Timeout: 0},
	} {
		_, err := NewRedis(o)
		if err == nil {
			t.Errorf("NewRedis(%q, %s) succeeded", o.URL, o.Timeout)
			continue
		}
		// The error is printed and logged: it must not carry the password.
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("NewRedis's error shows the password: %v", err)
		}
	}
}
