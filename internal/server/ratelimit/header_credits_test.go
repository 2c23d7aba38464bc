package ratelimit

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestCreditsHeaderFields: a key with credits has a "credits" item beside its rate's, whose w
// is this period's length and t the time to the refill; refused for credits, the rate's t is
// still its own; a key with credits and no rate announces the credits alone.
func TestCreditsHeaderFields(t *testing.T) {
	// November has 30 days (w=2592000); December 1 is 8 days and 20 hours away (t=763200).
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	m := NewMemory(clk)
	monthly := schedule(t, Monthly, "UTC", 0, 1)
	p := creditPolicy(t, "uid-fields", Limit{Requests: 4, Period: time.Hour, Burst: 4}, 2, monthly)
	want := []struct {
		allowed bool
		current string
	}{
		{true, `"apikey";r=3;t=900, "credits";r=1;t=763200`},
		{true, `"apikey";r=2;t=900, "credits";r=0;t=763200`},
		{false, `"apikey";r=2;t=900, "credits";r=0;t=763200`},
	}
	for i, w := range want {
		res, _ := m.Allow(context.Background(), p, 1)
		policy, current := Fields(p, res)
		if res.Allowed != w.allowed || policy != `"apikey";q=4;w=3600, "credits";q=2;w=2592000` || current != w.current {
			t.Errorf("request %d: allowed %v, RateLimit-Policy %q, RateLimit %q; want %v, %q", i+1, res.Allowed, policy, current, w.allowed, w.current)
		}
	}
	if res, _ := m.Allow(context.Background(), p, 1); !res.Credits.Exhausted || Seconds(res.RetryAfter) != 763200 {
		t.Errorf("refused for credits: %+v, want exhausted with Retry-After 763200 s", res)
	}

	rateless := creditPolicy(t, "uid-credits-only", Limit{}, 2, monthly)
	if rateless.HasRate() || !p.HasRate() {
		t.Errorf("HasRate: %v for credits alone, %v with a rate", rateless.HasRate(), p.HasRate())
	}
	res, _ := m.Allow(context.Background(), rateless, 1)
	if policy, current := Fields(rateless, res); policy != `"credits";q=2;w=2592000` || current != `"credits";r=1;t=763200` {
		t.Errorf("credits alone: RateLimit-Policy %q, RateLimit %q", policy, current)
	}
}
