//go:build !unit

package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

// TestCreditCosts: a key's costs price each request by its route (5 for the list on /v1, nothing
// for a gateway's /anything and the probe's /v1/nothing): two lists take 10 of 12 credits, a third is refused with a message
// giving what is left and what it costs, and the free route is still answered.
func TestCreditCosts(t *testing.T) {
	ns := env.Namespace(t, "costs")
	newConnection(t, ns, "a", "conn_a", nil)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC))
	s := startAuthzServer(t, noFailureLimit(&sc{TrustedProxies: []string{"127.0.0.1/32"}}), Deps{Clock: clk}, true)
	spec := switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 12, Refill: switchboardv1alpha1.CreditsMonthly,
		Costs: []switchboardv1alpha1.CreditCost{
			{Credits: 5, Methods: []switchboardv1alpha1.HTTPMethod{"GET"}, Paths: []string{"/v1/connections"}},
			{Credits: 0, Paths: []string{"/anything", "/v1/nothing"}}, // the probe below is free
		}}}
	k := newKey(t, ns, "priced", spec)
	eventually(t, "the server knows the key", func() bool { return s.get(t, "/v1/nothing", k.Key).Status != http.StatusUnauthorized })
	for _, want := range []string{`"credits";r=7;t=7200`, `"credits";r=2;t=7200`} {
		if got := s.get(t, "/v1/connections", k.Key); got.Status != http.StatusOK || got.Header.Get("Ratelimit") != want {
			t.Fatalf("a list costing 5: %d, RateLimit %q; want 200, %q", got.Status, got.Header.Get("Ratelimit"), want)
		}
	}
	over := s.get(t, "/v1/connections", k.Key)
	const msg = "The key has 2 credits left for this period and this request costs 5; they refill at 2026-12-01T00:00:00Z."
	if over.Status != http.StatusTooManyRequests || over.errorCode(t) != apicode.KeyCreditsExhausted || errorMessage(t, over) != msg {
		t.Errorf("a list costing 5 with 2 left: %d %s %q; want 429 %s %q", over.Status, over.errorCode(t), errorMessage(t, over), apicode.KeyCreditsExhausted, msg)
	}
	if got := s.askGRPC(t, call{withBearer(k.Key), "198.51.100.7", "connections"}); got.status != http.StatusOK || got.client.Get("Ratelimit") != `"credits";r=2;t=7200` {
		t.Errorf("ext_authz on a free route with 2 left: %d %s, RateLimit %q; want 200 and nothing spent", got.status, got.code, got.client.Get("Ratelimit"))
	}
}

// TestCreditsChargedOnSuccess: a key charged on success gets back what /v1 answers that are no
// success took (404, 405, 400), its RateLimit fields counting them back, and spends its 3
// credits on 3 lists; through a gateway, which never tells the server its answer, a request is
// charged when admitted.
func TestCreditsChargedOnSuccess(t *testing.T) {
	ns := env.Namespace(t, "onsuccess")
	newConnection(t, ns, "a", "conn_a", nil)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC))
	s := startAuthzServer(t, noFailureLimit(&sc{TrustedProxies: []string{"127.0.0.1/32"}}), Deps{Clock: clk}, true)
	onSuccess := func(name string) *keyFixture {
		return newKey(t, ns, name, switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{
			Amount: 3, Refill: switchboardv1alpha1.CreditsMonthly, Charge: switchboardv1alpha1.ChargeOnSuccess}})
	}
	k := onSuccess("on-success")
	eventually(t, "the server knows the key", func() bool {
		return s.get(t, "/v1/connections?limit=x", k.Key).Status != http.StatusUnauthorized
	})
	for _, failing := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/v1/nothing", http.StatusNotFound},
		{http.MethodPost, "/v1/connections", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/connections?limit=x", http.StatusBadRequest},
	} {
		got := s.request(t, failing.method, failing.path, func(h http.Header) { h.Set("Authorization", "Bearer "+k.Key) })
		if got.Status != failing.status {
			t.Errorf("%s %s: %d, want %d", failing.method, failing.path, got.Status, failing.status)
		}
		if failing.status != http.StatusBadRequest && got.Header.Get("Ratelimit") != `"credits";r=3;t=7200` {
			// A 400 is known only once the fields are written: they count its charge.
			t.Errorf("%s %s: RateLimit %q, want the charge counted back (r=3)", failing.method, failing.path, got.Header.Get("Ratelimit"))
		}
	}
	for i := range 3 {
		if got := s.get(t, "/v1/connections", k.Key); got.Status != http.StatusOK {
			t.Fatalf("list %d of 3 credits, after 4 answers that were no success: %d %s", i+1, got.Status, got.errorCode(t))
		}
	}
	if got := s.get(t, "/v1/connections", k.Key); got.Status != http.StatusTooManyRequests || got.errorCode(t) != apicode.KeyCreditsExhausted {
		t.Errorf("a fourth list: %d %s, want 429 %s", got.Status, got.errorCode(t), apicode.KeyCreditsExhausted)
	}

	g := onSuccess("through-a-gateway")
	eventually(t, "the server knows the gateway's key", func() bool {
		return s.get(t, "/v1/nothing", g.Key).Status != http.StatusUnauthorized
	})
	var answers []string
	for range 4 {
		got := s.askGRPC(t, call{withBearer(g.Key), "198.51.100.7", "connections"})
		answers = append(answers, got.code)
	}
	if want := []string{"", "", "", apicode.KeyCreditsExhausted}; strings.Join(answers, ",") != strings.Join(want, ",") {
		t.Errorf("ext_authz, charge OnSuccess: codes %q, want 3 admitted (charged when admitted) and %s", answers, apicode.KeyCreditsExhausted)
	}
}
