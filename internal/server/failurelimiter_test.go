//go:build !unit

package server

import (
	"net/http"
	"strconv"
	"testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

// TestRateLimitedAfterRepeatedFailures: an address that keeps failing gets 429 with
// Retry-After, while a valid key from another address still gets 200.
func TestRateLimitedAfterRepeatedFailures(t *testing.T) {
	ns := env.Namespace(t, "ratelimit")
	k := newKey(t, ns, "good", switchboardv1alpha1.APIKeySpec{})
	const burst = 5
	s := startServer(t, nil, &sc{AuthFailureLimit: failureLimit(0.01, burst), TrustedProxies: []string{"127.0.0.0/8"}}, Deps{}, true)
	from := func(addr, key string) response {
		return s.request(t, http.MethodGet, "/v1/connections", func(h http.Header) {
			h.Set("X-Forwarded-For", addr)
			if key != "" {
				h.Set("Authorization", "Bearer "+key)
			}
		})
	}
	limitedBefore := metricValue(t, "switchboard_api_auth_total", "code", apicode.RateLimited, "reason", "")
	for i := range burst {
		if resp := from("203.0.113.7", "sb_live_guess"+strconv.Itoa(i)); resp.Status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, resp.Status)
		}
	}
	resp := from("203.0.113.7", "sb_live_guess")
	if resp.Status != http.StatusTooManyRequests || resp.errorCode(t) != apicode.RateLimited {
		t.Fatalf("after %d failures: %d %s, want 429 RATE_LIMITED", burst, resp.Status, resp.Body)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After = %q, want whole seconds >= 1", resp.Header.Get("Retry-After"))
	}
	if resp := from("203.0.113.7", ""); resp.Status != http.StatusTooManyRequests {
		t.Errorf("the limited address without a key: %d, want 429", resp.Status)
	}
	// Other clients are untouched: a valid key and even a failure of their own.
	for range 20 {
		if resp := from("203.0.113.8", k.Key); resp.Status != http.StatusOK {
			t.Fatalf("a valid key from another address: %d, want 200", resp.Status)
		}
	}
	if resp := from("198.51.100.1", "sb_live_other"); resp.Status != http.StatusUnauthorized {
		t.Errorf("another address's first failure: %d, want 401", resp.Status)
	}
	// Exactly the two requests of the limited address were refused as RATE_LIMITED.
	if got := metricValue(t, "switchboard_api_auth_total", "code", apicode.RateLimited, "reason", "") - limitedBefore; got != 2 {
		t.Errorf("RATE_LIMITED outcomes counted %v, want 2", got)
	}
}

// TestValidKeyNeverLockedOut performs the lock-out attack of docs/security.md section 3: behind
// a NAT, a proxy or an Ingress without trustedProxies, every client shares one address, and
// someone sends bad keys from it. Their failures get 429 once the address has none left; a valid
// key from the very same address is still served, every time.
func TestValidKeyNeverLockedOut(t *testing.T) {
	ns := env.Namespace(t, "lockout")
	newConnection(t, ns, "one", "conn_lockout", nil)
	k := newKey(t, ns, "victim", switchboardv1alpha1.APIKeySpec{})
	const burst = 20
	// The shipped burst; a slow refill so that no failure is forgiven while the test runs.
	s := startServer(t, nil, &sc{AuthFailureLimit: failureLimit(0.001, burst)}, Deps{}, true)
	statuses := map[int]int{}
	for i := range burst + 5 {
		key := "sb_live_guess" + strconv.Itoa(i)
		if i%5 == 0 {
			key = "" // no header at all is a failure too
		}
		statuses[s.get(t, "/v1/connections", key).Status]++
	}
	// startServer's readiness probe, a request without a key, spent the first failure.
	if statuses[http.StatusUnauthorized] != burst-1 || statuses[http.StatusTooManyRequests] != 6 {
		t.Fatalf("25 failures from one address were answered %v, want %d×401 then 6×429", statuses, burst-1)
	}
	for i := range 5 {
		resp := s.get(t, "/v1/connections", k.Key)
		if resp.Status != http.StatusOK {
			t.Fatalf("request %d with a valid key from the limited address: %d %s, want 200", i, resp.Status, resp.Body)
		}
		if got := ids(resp.connections(t)); len(got) != 1 || got[0] != "conn_lockout" {
			t.Fatalf("the valid key listed %v", got)
		}
	}
	// The limit still holds for failures after the valid key's successes.
	if resp := s.get(t, "/v1/connections", "sb_live_guess"); resp.Status != http.StatusTooManyRequests || resp.errorCode(t) != apicode.RateLimited {
		t.Errorf("a bad key after the valid ones: %d %s, want 429 RATE_LIMITED", resp.Status, resp.Body)
	}
}
