//go:build !unit

package server

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

func rateLimited(requests int32, period time.Duration) switchboardv1alpha1.APIKeySpec {
	return switchboardv1alpha1.APIKeySpec{RateLimit: &switchboardv1alpha1.APIKeyRateLimit{Requests: requests, Period: metav1.Duration{Duration: period}}}
}

// firstAnswer polls s with key until the server knows the key (anything but 401) and returns
// that first answer: with a rate limit, it is the first request of the key's budget.
func firstAnswer(t *testing.T, s *testServer, key string, header func(http.Header)) response {
	t.Helper()
	var resp response
	eventually(t, "the server knows the key", func() bool {
		resp = s.request(t, http.MethodGet, "/v1/connections", func(h http.Header) {
			h.Set("Authorization", "Bearer "+key)
			if header != nil {
				header(h)
			}
		})
		return resp.Status != http.StatusUnauthorized
	})
	return resp
}

// wantLimit checks a response of a rate-limited key: its status, and the two RateLimit fields.
func wantLimit(t *testing.T, what string, resp response, status int, policy, now string) {
	t.Helper()
	if resp.Status != status || resp.Header.Get("RateLimit-Policy") != policy || resp.Header.Get("RateLimit") != now {
		t.Errorf("%s: %d, RateLimit-Policy %q, RateLimit %q; want %d, %q, %q (%s)", what, resp.Status,
			resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"), status, policy, now, resp.Body)
	}
}

// TestKeyRateLimitInMemory: a key limited to 3 per minute gets exactly 3, then 429 with
// Retry-After and the RateLimit fields; one request comes back every 20 s, the whole budget
// after a minute. The clock is injected: nothing sleeps.
func TestKeyRateLimitInMemory(t *testing.T) {
	doc := loadDocument(t)
	ns := env.Namespace(t, "ratelimit")
	newConnection(t, ns, "a", "conn_a", nil)
	k := newKey(t, ns, "limited", rateLimited(3, time.Minute))
	clk := clocktesting.NewFakePassiveClock(time.Now())
	s := startServer(t, nil, noFailureLimit(nil), Deps{Clock: clk}, true)
	const policy = `"apikey";q=3;w=60`

	first := firstAnswer(t, s, k.Key, nil)
	wantLimit(t, "1st", first, http.StatusOK, policy, `"apikey";r=2;t=20`)
	if err := doc.checkResponse("/v1/connections", "GET", first); err != nil {
		t.Error(err)
	}
	// Every authenticated request counts, whatever it asks for.
	wantLimit(t, "2nd (a 404)", s.get(t, "/v1/nothing", k.Key), http.StatusNotFound, policy, `"apikey";r=1;t=20`)
	wantLimit(t, "3rd", s.get(t, "/v1/connections", k.Key), http.StatusOK, policy, `"apikey";r=0;t=20`)

	limitedBefore := metricValue(t, "switchboard_api_rate_limited_total", "store", "memory")
	over := s.get(t, "/v1/connections", k.Key)
	wantLimit(t, "4th", over, http.StatusTooManyRequests, policy, `"apikey";r=0;t=20`)
	if over.errorCode(t) != apicode.KeyRateLimited || over.Header.Get("Retry-After") != "20" {
		t.Errorf("4th: %s with Retry-After %q, want %s and 20", over.Body, over.Header.Get("Retry-After"), apicode.KeyRateLimited)
	}
	if err := doc.checkResponse("/v1/connections", "GET", over); err != nil {
		t.Error(err)
	}
	if got := metricValue(t, "switchboard_api_rate_limited_total", "store", "memory") - limitedBefore; got != 1 {
		t.Errorf("switchboard_api_rate_limited_total{store=memory} grew by %v, want 1", got)
	}
	// Another tenant's key of the same name and limit has its own budget (named by UID).
	other := env.Namespace(t, "ratelimit-other")
	newConnection(t, other, "a", "conn_a", nil)
	twin := newKey(t, other, "limited", rateLimited(3, time.Minute))
	wantLimit(t, "another tenant's twin", firstAnswer(t, s, twin.Key, nil), http.StatusOK, policy, `"apikey";r=2;t=20`)

	clk.SetTime(clk.Now().Add(19 * time.Second))
	wantLimit(t, "19 s later", s.get(t, "/v1/connections", k.Key), http.StatusTooManyRequests, policy, `"apikey";r=0;t=1`)
	clk.SetTime(clk.Now().Add(time.Second))
	wantLimit(t, "20 s later", s.get(t, "/v1/connections", k.Key), http.StatusOK, policy, `"apikey";r=0;t=20`)
	wantLimit(t, "20 s later, again", s.get(t, "/v1/connections", k.Key), http.StatusTooManyRequests, policy, `"apikey";r=0;t=20`)

	clk.SetTime(clk.Now().Add(time.Minute))
	for i, want := range []string{`"apikey";r=2;t=20`, `"apikey";r=1;t=20`, `"apikey";r=0;t=20`} {
		wantLimit(t, "a minute later, request "+strconv.Itoa(i+1), s.get(t, "/v1/connections", k.Key), http.StatusOK, policy, want)
	}
	wantLimit(t, "a minute later, past the budget", s.get(t, "/v1/connections", k.Key), http.StatusTooManyRequests, policy, `"apikey";r=0;t=20`)

	// A new policy applies at once, with a whole budget of its own: the exhausted key is not
	// held back by what it spent under the old limit. (The clock stands still: the old
	// budget alone would refuse it for another 20 s.)
	patchSpec(t, k.APIKey, func(spec *switchboardv1alpha1.APIKeySpec) {
		spec.RateLimit = &switchboardv1alpha1.APIKeyRateLimit{Requests: 600, Period: metav1.Duration{Duration: time.Minute}, Burst: new(int32(10))}
	})
	const raised = `"apikey";q=600;w=60;switchboard-burst=10`
	var seen response
	eventually(t, "the new policy", func() bool {
		seen = s.get(t, "/v1/connections", k.Key)
		return seen.Header.Get("RateLimit-Policy") == raised
	})
	wantLimit(t, "the first request under the raised limit", seen, http.StatusOK, raised, `"apikey";r=9;t=1`)
	wantLimit(t, "the second", s.get(t, "/v1/connections", k.Key), http.StatusOK, raised, `"apikey";r=8;t=1`)
}

// TestKeyWithoutPolicyUnchanged: a key without a policy gets what every key got before
// policies existed: no RateLimit fields, no Retry-After, the same body and the same headers
// as a limited key's answer has besides its RateLimit fields.
func TestKeyWithoutPolicyUnchanged(t *testing.T) {
	ns := env.Namespace(t, "nopolicy")
	newConnection(t, ns, "a", "conn_a", nil)
	open := newKey(t, ns, "open", switchboardv1alpha1.APIKeySpec{})
	limited := newKey(t, ns, "limited", rateLimited(1000, time.Minute))
	s := startServer(t, nil, noFailureLimit(nil), Deps{}, true)
	firstAnswer(t, s, open.Key, nil)
	firstAnswer(t, s, limited.Key, nil)

	names := func(h http.Header) []string {
		var out []string
		for name := range h {
			if name != "Ratelimit-Policy" && name != "Ratelimit" {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		method, path string
		header       func(http.Header)
	}{
		{http.MethodGet, "/v1/connections", nil},
		{http.MethodGet, "/v1/connections?limit=1", nil},
		{http.MethodHead, "/v1/connections", nil},
		{http.MethodPost, "/v1/connections", nil},
		{http.MethodGet, "/v1/other", nil},
		{http.MethodGet, "/v1/connections?limit=0", nil},
	} {
		get := func(key string) response {
			return s.request(t, tc.method, tc.path, func(h http.Header) { h.Set("Authorization", "Bearer "+key) })
		}
		o, l := get(open.Key), get(limited.Key)
		what := tc.method + " " + tc.path
		for _, name := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
			if v := o.Header.Get(name); v != "" {
				t.Errorf("%s: a key without a policy got %s: %s", what, name, v)
			}
		}
		if l.Header.Get("RateLimit") == "" {
			t.Errorf("%s: the limited key got no RateLimit field", what)
		}
		if o.Status != l.Status || string(o.Body) != string(l.Body) || !slices.Equal(names(o.Header), names(l.Header)) {
			t.Errorf("%s: without a policy %d %v %s; with one %d %v %s", what, o.Status, names(o.Header), o.Body, l.Status, names(l.Header), l.Body)
		}
	}
	etag := s.get(t, "/v1/connections", open.Key).Header.Get("ETag")
	notModified := s.request(t, http.MethodGet, "/v1/connections", func(h http.Header) {
		h.Set("Authorization", "Bearer "+open.Key)
		h.Set("If-None-Match", etag)
	})
	if notModified.Status != http.StatusNotModified || notModified.Header.Get("RateLimit") != "" {
		t.Errorf("304 of a key without a policy: %d, RateLimit %q", notModified.Status, notModified.Header.Get("RateLimit"))
	}
}

// TestSourceRanges: a valid key from outside its allowed source ranges gets 403, from inside
// 200; the client is who the trusted-proxy rules say, with and without trusted proxies.
func TestSourceRanges(t *testing.T) {
	doc := loadDocument(t)
	ns := env.Namespace(t, "sources")
	newConnection(t, ns, "a", "conn_a", nil)
	partner := newKey(t, ns, "partner", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"192.0.2.0/24", "2001:db8::/32"}})
	local := newKey(t, ns, "local", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"127.0.0.0/8"}})
	meteredSpec := rateLimited(1, time.Hour)
	meteredSpec.AllowedSourceRanges = []switchboardv1alpha1.CIDR{"192.0.2.0/24"}
	metered := newKey(t, ns, "metered", meteredSpec)
	xff := func(v string) func(http.Header) { return func(h http.Header) { h.Set("X-Forwarded-For", v) } }

	// Without trusted proxies the client is the peer, 127.0.0.1, whatever X-Forwarded-For says.
	direct := startServer(t, nil, noFailureLimit(nil), Deps{}, true)
	if resp := firstAnswer(t, direct, local.Key, nil); resp.Status != http.StatusOK {
		t.Errorf("a loopback key from loopback: %d %s", resp.Status, resp.Body)
	}
	refusedBefore := metricValue(t, "switchboard_api_source_refused_total", "", "")
	outside := firstAnswer(t, direct, partner.Key, nil)
	if outside.Status != http.StatusForbidden || outside.errorCode(t) != apicode.SourceNotAllowed {
		t.Errorf("from outside: %d %s, want 403 %s", outside.Status, outside.Body, apicode.SourceNotAllowed)
	}
	if err := doc.checkResponse("/v1/connections", "GET", outside); err != nil {
		t.Error(err)
	}
	if got := metricValue(t, "switchboard_api_source_refused_total", "", "") - refusedBefore; got != 1 {
		t.Errorf("switchboard_api_source_refused_total grew by %v, want 1", got)
	}
	if resp := firstAnswer(t, direct, partner.Key, xff("192.0.2.5")); resp.Status != http.StatusForbidden {
		t.Errorf("X-Forwarded-For from a peer nobody trusts was believed: %d", resp.Status)
	}
	// Decided after authentication: a caller without a valid key learns nothing of ranges.
	if resp := direct.get(t, "/v1/connections", "sb_live_guess"); resp.Status != http.StatusUnauthorized {
		t.Errorf("an invalid key: %d, want 401", resp.Status)
	}
	// Refused for its source, a request takes nothing from the budget and says nothing of it.
	for range 3 {
		resp := firstAnswer(t, direct, metered.Key, nil)
		if resp.Status != http.StatusForbidden || resp.Header.Get("RateLimit") != "" || resp.Header.Get("RateLimit-Policy") != "" {
			t.Errorf("a metered key from outside: %d, RateLimit %q", resp.Status, resp.Header.Get("RateLimit"))
		}
	}

	// Behind a trusted proxy, the client is the rightmost address the proxies did not add.
	proxied := startServer(t, nil, noFailureLimit(&sc{TrustedProxies: []string{"127.0.0.0/8"}}), Deps{}, true)
	for _, tc := range []struct {
		key, forwarded string
		want           int
	}{
		{partner.Key, "192.0.2.5", http.StatusOK},
		{partner.Key, "2001:db8:7::1", http.StatusOK},
		{partner.Key, "198.51.100.7", http.StatusForbidden},
		{partner.Key, "192.0.2.5, 198.51.100.7", http.StatusForbidden}, // the proxy saw 198.51.100.7
		{partner.Key, "198.51.100.7, 192.0.2.5", http.StatusOK},        // the left entry is the client's own claim
		{partner.Key, "192.0.2.5, 127.0.0.9", http.StatusOK},           // trusted hops are skipped
		{local.Key, "192.0.2.5", http.StatusForbidden},
		{local.Key, "", http.StatusOK},
	} {
		var header func(http.Header)
		if tc.forwarded != "" {
			header = xff(tc.forwarded)
		}
		if resp := firstAnswer(t, proxied, tc.key, header); resp.Status != tc.want {
			t.Errorf("X-Forwarded-For %q: %d %s, want %d", tc.forwarded, resp.Status, resp.Body, tc.want)
		}
	}
	wantLimit(t, "the metered key from inside, after three refusals", firstAnswer(t, proxied, metered.Key, xff("192.0.2.9")),
		http.StatusOK, `"apikey";q=1;w=3600`, `"apikey";r=0;t=3600`)

	// Empty ranges: anywhere again.
	patchSpec(t, partner.APIKey, func(spec *switchboardv1alpha1.APIKeySpec) { spec.AllowedSourceRanges = nil })
	eventually(t, "the key usable from anywhere", func() bool { return direct.get(t, "/v1/connections", partner.Key).Status == http.StatusOK })
}

// TestSourceRangesFailClosedBehindUntrustedProxy: behind an ingress whose X-Forwarded-For is not
// trusted (the chart's ingress.withoutTrustedProxies, which passes --peers-are-proxies), every
// client has the ingress's address. Here the "ingress" is 127.0.0.1, so a key limited to
// 127.0.0.0/8 would answer anyone who reaches the ingress; instead it is refused with a message
// that says why, whatever X-Forwarded-For claims, while keys without ranges are served. Once
// the proxy is trusted, the client's address is known and the ranges apply again.
func TestSourceRangesFailClosedBehindUntrustedProxy(t *testing.T) {
	doc := loadDocument(t)
	ns := env.Namespace(t, "unknown-source")
	newConnection(t, ns, "a", "conn_a", nil)
	local := newKey(t, ns, "local", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"127.0.0.0/8"}})
	open := newKey(t, ns, "open", switchboardv1alpha1.APIKeySpec{})
	xff := func(v string) func(http.Header) { return func(h http.Header) { h.Set("X-Forwarded-For", v) } }

	behind := startServer(t, nil, noFailureLimit(&sc{PeersAreProxies: true}), Deps{}, true)
	refusedBefore := metricValue(t, "switchboard_api_source_refused_total", "", "")
	for _, header := range []func(http.Header){nil, xff("127.0.0.5"), xff("192.0.2.1")} {
		resp := firstAnswer(t, behind, local.Key, header)
		if resp.Status != http.StatusForbidden || resp.errorCode(t) != apicode.SourceNotAllowed || !strings.Contains(string(resp.Body), "cannot know the client's address") {
			t.Errorf("a key with source ranges behind an untrusted proxy: %d %s, want 403 %s saying the address is unknown", resp.Status, resp.Body, apicode.SourceNotAllowed)
		}
		if err := doc.checkResponse("/v1/connections", "GET", resp); err != nil {
			t.Error(err)
		}
	}
	if got := metricValue(t, "switchboard_api_source_refused_total", "", "") - refusedBefore; got != 3 {
		t.Errorf("switchboard_api_source_refused_total grew by %v, want 3", got)
	}
	if resp := firstAnswer(t, behind, open.Key, nil); resp.Status != http.StatusOK {
		t.Errorf("a key without source ranges behind an untrusted proxy: %d %s", resp.Status, resp.Body)
	}

	trusted := startServer(t, nil, noFailureLimit(&sc{PeersAreProxies: true, TrustedProxies: []string{"127.0.0.1/32"}}), Deps{}, true)
	if resp := firstAnswer(t, trusted, local.Key, xff("127.0.0.7")); resp.Status != http.StatusOK {
		t.Errorf("through a trusted proxy, from inside the ranges: %d %s", resp.Status, resp.Body)
	}
	outside := firstAnswer(t, trusted, local.Key, xff("192.0.2.1"))
	if outside.Status != http.StatusForbidden || strings.Contains(string(outside.Body), "cannot know") {
		t.Errorf("through a trusted proxy, from outside the ranges: %d %s, want 403 for the address", outside.Status, outside.Body)
	}
}
