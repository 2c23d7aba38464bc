//go:build !unit

package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/authz"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestCreditsEverywhere: a key with 3 credits a month (and a rate) answers 3 requests, then 429
// API_KEY_CREDITS_EXHAUSTED with Retry-After to the next month's start and a "credits" item in
// the RateLimit fields, on /v1, forward-auth (both modes) and ext_authz alike; once the clock
// passes the month's end, the key is answered again. The clock is injected: nothing sleeps.
func TestCreditsEverywhere(t *testing.T) {
	doc := loadDocument(t)
	ns := env.Namespace(t, "credits")
	newConnection(t, ns, "a", "conn_a", nil)
	// Two hours before December: November has 30 days (w=2592000), the refill is 7200 s away.
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC))
	s := startAuthzServer(t, noFailureLimit(&sc{TrustedProxies: []string{"127.0.0.1/32"}}), Deps{Clock: clk}, true)
	keys := map[string]*keyFixture{}
	for _, p := range s.protocols() {
		spec := rateLimited(100, time.Hour)
		spec.Audiences = []switchboardv1alpha1.Audience{"connections"}
		spec.Credits = &switchboardv1alpha1.APIKeyCredits{Amount: 3, Refill: switchboardv1alpha1.CreditsMonthly}
		k := newKey(t, ns, "plan-"+string(rune('a'+len(keys))), spec)
		keys[p.name] = k
		// Known once not 401; asked for an audience the key lacks, so its credits are intact.
		eventually(t, "the server knows "+k.APIKey.Name, func() bool {
			return s.askHTTP(t, authz.ForwardAuthPath, call{authorization: withBearer(k.Key), client: "192.0.2.1", audience: "billing"}).status != http.StatusUnauthorized
		})
	}
	const november = `"apikey";q=100;w=3600, "credits";q=3;w=2592000`
	for _, p := range s.protocols() {
		c := call{withBearer(keys[p.name].Key), "198.51.100.7", "connections"}
		for i, want := range []string{`"apikey";r=99;t=36, "credits";r=2;t=7200`, `"apikey";r=98;t=36, "credits";r=1;t=7200`, `"apikey";r=97;t=36, "credits";r=0;t=7200`} {
			if got := p.ask(t, c); got.status != http.StatusOK || got.client.Get("Ratelimit-Policy") != november || got.client.Get("Ratelimit") != want {
				t.Errorf("%s, credit %d: %d %s, RateLimit-Policy %q, RateLimit %q; want 200, %q, %q", p.name, i+1, got.status, got.code,
					got.client.Get("Ratelimit-Policy"), got.client.Get("Ratelimit"), november, want)
			}
		}
		got := p.ask(t, c)
		want := answer{status: http.StatusTooManyRequests, code: apicode.KeyCreditsExhausted}.forProtocol(p.name)
		// The rate's t is its own (36 s), the credits' the refill's, as Retry-After.
		const spent = `"apikey";r=97;t=36, "credits";r=0;t=7200`
		if got.status != want.status || got.code != want.code || got.client.Get("Retry-After") != "7200" || got.client.Get("Ratelimit") != spent {
			t.Errorf("%s past the credits: %d %s, Retry-After %q, RateLimit %q; want %d %s, 7200, %q", p.name, got.status, got.code,
				got.client.Get("Retry-After"), got.client.Get("Ratelimit"), want.status, want.code, spent)
		}
	}
	over := s.get(t, "/v1/connections", keys["/v1"].Key)
	const msg = "The key's credits for this period are spent; they refill at 2026-12-01T00:00:00Z."
	if m := errorMessage(t, over); m != msg {
		t.Errorf("/v1 past the credits says %q, want %q", m, msg)
	}
	if err := doc.checkResponse("/v1/connections", "GET", over); err != nil {
		t.Error(err)
	}

	// A key with credits alone announces no rate to Envoy: it has none of its own.
	aloneSpec := switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 3, Refill: switchboardv1alpha1.CreditsMonthly}}
	alone := newKey(t, ns, "alone", aloneSpec)
	var got answer
	eventually(t, "the server knows the key with credits alone", func() bool {
		got = s.askGRPC(t, call{withBearer(alone.Key), "198.51.100.8", "connections"})
		return got.status != http.StatusUnauthorized
	})
	if got.status != http.StatusOK || got.envoyLimit != "" || got.client.Get("Ratelimit") != `"credits";r=2;t=7200` {
		t.Errorf("ext_authz, credits alone: %d, Envoy's limit %q, RateLimit %q; want 200, none, credits alone", got.status, got.envoyLimit, got.client.Get("Ratelimit"))
	}

	// December: the credits are whole again (December has 31 days: w=2678400).
	clk.SetTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	for _, p := range s.protocols() {
		got := p.ask(t, call{withBearer(keys[p.name].Key), "198.51.100.7", "connections"})
		if got.status != http.StatusOK || got.client.Get("Ratelimit-Policy") != `"apikey";q=100;w=3600, "credits";q=3;w=2678400` ||
			got.client.Get("Ratelimit") != `"apikey";r=99;t=36, "credits";r=2;t=2678400` {
			t.Errorf("%s in December: %d %s, RateLimit-Policy %q, RateLimit %q", p.name, got.status, got.code,
				got.client.Get("Ratelimit-Policy"), got.client.Get("Ratelimit"))
		}
	}
}

// TestCreditsSharedOnRedis: two servers on one Redis sell a key's credits once between them (a
// key with credits and no rate), refill them when the month changes, and refuse the key with 503
// NOT_READY once Redis is gone rather than count its credits again in each one's memory.
func TestCreditsSharedOnRedis(t *testing.T) {
	redis := testenv.StartRedis(t)
	ns := env.Namespace(t, "credits-redis")
	newConnection(t, ns, "a", "conn_a", nil)
	k := newKey(t, ns, "plan", switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 4, Refill: switchboardv1alpha1.CreditsMonthly}})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC))
	c := noFailureLimit(&sc{RateLimitRedis: configv1alpha1.RateLimitRedis{URL: redis.URL()}})
	a, b := startServer(t, nil, c, Deps{Clock: clk}, true), startServer(t, nil, c, Deps{Clock: clk}, true)
	const policy = `"credits";q=4;w=2592000`
	wantLimit(t, "1st, on a", firstAnswer(t, a, k.Key, nil), http.StatusOK, policy, `"credits";r=3;t=7200`)
	wantLimit(t, "2nd, on b", firstAnswer(t, b, k.Key, nil), http.StatusOK, policy, `"credits";r=2;t=7200`)
	wantLimit(t, "3rd, on a", a.get(t, "/v1/connections", k.Key), http.StatusOK, policy, `"credits";r=1;t=7200`)
	wantLimit(t, "4th, on b", b.get(t, "/v1/connections", k.Key), http.StatusOK, policy, `"credits";r=0;t=7200`)
	for name, s := range map[string]*testServer{"a": a, "b": b} {
		resp := s.get(t, "/v1/connections", k.Key)
		wantLimit(t, "past the credits, on "+name, resp, http.StatusTooManyRequests, policy, `"credits";r=0;t=7200`)
		if resp.errorCode(t) != apicode.KeyCreditsExhausted || resp.Header.Get("Retry-After") != "7200" {
			t.Errorf("past the credits, on %s: %s, Retry-After %q", name, resp.Body, resp.Header.Get("Retry-After"))
		}
	}
	clk.SetTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	wantLimit(t, "December, on b", b.get(t, "/v1/connections", k.Key), http.StatusOK, `"credits";q=4;w=2678400`, `"credits";r=3;t=2678400`)

	redis.Stop()
	for name, s := range map[string]*testServer{"a": a, "b": b} {
		resp := s.get(t, "/v1/connections", k.Key)
		if resp.Status != http.StatusServiceUnavailable || resp.errorCode(t) != apicode.NotReady || resp.Header.Get("RateLimit") != "" {
			t.Errorf("Redis gone, on %s: %d %s, RateLimit %q; want 503 %s without RateLimit", name, resp.Status, resp.Body, resp.Header.Get("RateLimit"), apicode.NotReady)
		}
	}
}

// errorMessage is the message of r's error object.
func errorMessage(t *testing.T, r response) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Fatalf("not an error object: %v: %s", err, r.Body)
	}
	return e.Error.Message
}

// TestCreditsInStatus: the usage writer puts a key's balance in status.credits with its
// lastUsedAt, within its interval: on one replica from its memory, and on Redis the shared count,
// so the replica that writes it shows the requests the other answered too.
func TestCreditsInStatus(t *testing.T) {
	redis := testenv.StartRedis(t)
	ns := env.Namespace(t, "credits-status")
	newConnection(t, ns, "a", "conn_a", nil)
	spec := switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 100, Refill: switchboardv1alpha1.CreditsMonthly}}
	lastUsed := configv1alpha1.LastUsed{Interval: &metav1.Duration{Duration: time.Second}}
	deps := Deps{LastUsedFlush: 200 * time.Millisecond}
	statusOf := func(k *keyFixture) *switchboardv1alpha1.APIKeyCreditsStatus {
		var ak switchboardv1alpha1.APIKey
		if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(k.APIKey), &ak); err != nil {
			t.Fatal(err)
		}
		return ak.Status.Credits
	}
	spend := func(s *testServer, k *keyFixture, n int) {
		for range n {
			if resp := s.get(t, "/v1/connections", k.Key); resp.Status != http.StatusOK {
				t.Fatalf("status %d: %s", resp.Status, resp.Body)
			}
		}
	}
	waitBalance := func(k *keyFixture, used int64) {
		t.Helper()
		now := time.Now().UTC()
		refill := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		eventually(t, fmt.Sprintf("status.credits to show %d used", used), func() bool {
			c := statusOf(k)
			return c != nil && c.Used == used && c.Remaining == 100-used && c.PeriodEnd.Time.Equal(refill) && c.Period != "" && !c.ObservedAt.IsZero()
		})
	}

	memoryKey := newKey(t, ns, "memory", spec)
	one := startServer(t, nil, noFailureLimit(&sc{LastUsed: lastUsed}), deps, true)
	spend(one, memoryKey, 3)
	waitBalance(memoryKey, 3)
	spend(one, memoryKey, 2)
	waitBalance(memoryKey, 5)

	redisKey := newKey(t, ns, "redis", spec)
	c := noFailureLimit(&sc{LastUsed: lastUsed, RateLimitRedis: configv1alpha1.RateLimitRedis{URL: redis.URL()}})
	a, b := startServer(t, nil, c, deps, true), startServer(t, nil, c, deps, true)
	spend(a, redisKey, 2)
	waitBalance(redisKey, 2)
	time.Sleep(1100 * time.Millisecond) // past a's write by an interval, so that b's use is due
	spend(b, redisKey, 2)
	waitBalance(redisKey, 4)
}
