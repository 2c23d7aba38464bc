package keycheck

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
)

var testNow = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

var trustedLoopback = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}

// testIndex is an index holding one key per spec: key i belongs to the APIKey tenant/uid-i. It
// returns the keys, in the specs' order.
func testIndex(tb testing.TB, specs ...switchboardv1alpha1.APIKeySpec) (*keyindex.Index, []string) {
	tb.Helper()
	idx := keyindex.New()
	keys := make([]string, len(specs))
	for i, spec := range specs {
		key, err := apikey.Generate("sb")
		if err != nil {
			tb.Fatal(err)
		}
		keys[i] = key
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: string(uid), UID: uid}, Spec: spec}
		if err := keyindextest.PutKey(idx, ak, key); err != nil {
			tb.Fatal(err)
		}
	}
	return idx, keys
}

// testChecker is a ready Checker over idx on a clock stopped at testNow, with a failure limiter
// of burst 3 that regains a failure a second.
func testChecker(tb testing.TB, idx *keyindex.Index) *Checker {
	tb.Helper()
	ready := &atomic.Bool{}
	ready.Store(true)
	c, err := New(Config{Index: idx, Ready: ready, KeyPrefix: "sb", Clock: clocktesting.NewFakePassiveClock(testNow),
		FailureRate: 1, FailureBurst: 3, FailureClients: 1024, TrustedProxies: trustedLoopback})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func bearerOf(key string) []string { return []string{"Bearer " + key} }

// TestDecide: every kind of verdict, as each protocol's request carries it (an HTTP request, or
// an address the gateway gave), with the status, code, challenge and Retry-After every protocol
// answers with, what the access log may show of the key and why a key was refused.
func TestDecide(t *testing.T) {
	idx, keys := testIndex(t,
		switchboardv1alpha1.APIKeySpec{},
		switchboardv1alpha1.APIKeySpec{Revoked: true},
		switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{"billing"}},
		switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"192.0.2.0/24"}},
	)
	valid, revoked, billing, partner := keys[0], keys[1], keys[2], keys[3]
	unknown, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	from := func(addr string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/v1/connections", nil)
		r.RemoteAddr = "10.0.0.1:1234"
		r.Header.Set("X-Forwarded-For", addr)
		return r
	}
	tests := []struct {
		name string
		req  Request
		// What the verdict must say: its answer, the hint the access log may show, why an
		// invalid key was refused, the APIKey the key belongs to, and whether the refusal says
		// the client's address cannot be known.
		status          int
		code, challenge string
		hint, reason    string
		keyName         string
		sourceUnknown   bool
	}{
		{name: "valid", req: Request{Authorization: bearerOf(valid), Audience: "connections"},
			status: 200, hint: apikey.Hint(valid), keyName: "uid-0"},
		{name: "missing", req: Request{Audience: "connections"},
			status: 401, code: apicode.APIKeyMissing, challenge: realm},
		{name: "another scheme", req: Request{Authorization: []string{"Basic dXNlcjpwYXNz"}},
			status: 401, code: apicode.APIKeyMissing, challenge: realm + `, error="invalid_request"`},
		{name: "two fields", req: Request{Authorization: []string{"Bearer " + valid, "Bearer " + valid}},
			status: 401, code: apicode.APIKeyMissing, challenge: realm + `, error="invalid_request"`},
		{name: "not a key: no hint", req: Request{Authorization: bearerOf("eyJhbGciOiJSUzI1NiJ9.e30.sig")},
			status: 401, code: apicode.APIKeyInvalid, challenge: realm + `, error="invalid_token"`, reason: "unknown"},
		{name: "unknown key", req: Request{Authorization: bearerOf(unknown)},
			status: 401, code: apicode.APIKeyInvalid, challenge: realm + `, error="invalid_token"`, hint: apikey.Hint(unknown), reason: "unknown"},
		{name: "revoked key", req: Request{Authorization: bearerOf(revoked)},
			status: 401, code: apicode.APIKeyInvalid, challenge: realm + `, error="invalid_token"`, hint: apikey.Hint(revoked), reason: "revoked"},
		{name: "audience not the key's", req: Request{Authorization: bearerOf(billing), Audience: "connections"},
			status: 403, code: apicode.AudienceNotAllowed, hint: apikey.Hint(billing), keyName: "uid-2"},
		{name: "the key's audience", req: Request{Authorization: bearerOf(billing), Audience: "billing"},
			status: 200, hint: apikey.Hint(billing), keyName: "uid-2"},
		{name: "source inside, from a trusted proxy's X-Forwarded-For", req: Request{Authorization: bearerOf(partner), HTTP: from("192.0.2.7")},
			status: 200, hint: apikey.Hint(partner), keyName: "uid-3"},
		{name: "source outside", req: Request{Authorization: bearerOf(partner), HTTP: from("198.51.100.7")},
			status: 403, code: apicode.SourceNotAllowed, hint: apikey.Hint(partner), keyName: "uid-3"},
		{name: "source given by the gateway", req: Request{Authorization: bearerOf(partner), Addr: netip.MustParseAddr("192.0.2.8"), AddrKnown: true},
			status: 200, hint: apikey.Hint(partner), keyName: "uid-3"},
		{name: "source unknown", req: Request{Authorization: bearerOf(partner)},
			status: 403, code: apicode.SourceNotAllowed, hint: apikey.Hint(partner), keyName: "uid-3", sourceUnknown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testChecker(t, idx) // a failure limiter of its own, so rows do not spend each other's
			tt.req.Now = c.Now(time.Now())
			v := c.Decide(context.Background(), &tt.req)
			if v.Status != tt.status || v.Code != tt.code || v.Challenge != tt.challenge || v.RetryAfter() != "" {
				t.Errorf("verdict %d %q, challenge %q, Retry-After %q; want %d %q, %q and none", v.Status, v.Code, v.Challenge, v.RetryAfter(),
					tt.status, tt.code, tt.challenge)
			}
			if v.Allowed() != (tt.code == "") || (v.Message == "") != v.Allowed() {
				t.Errorf("allowed %v with code %q and message %q", v.Allowed(), v.Code, v.Message)
			}
			if v.Hint() != tt.hint || tt.code == apicode.APIKeyInvalid && v.Reason() != tt.reason {
				t.Errorf("hint %q, reason %q; want %q, %q", v.Hint(), v.Reason(), tt.hint, tt.reason)
			}
			keyName := ""
			if v.Key() != nil {
				keyName = v.Key().Name
			}
			if keyName != tt.keyName {
				t.Errorf("the verdict's key is the APIKey %q, want %q", keyName, tt.keyName)
			}
			if tt.sourceUnknown != (v.Message == msgSourceUnknown) {
				t.Errorf("message %q", v.Message)
			}
			if _, _, ok := v.RateLimitFields(); ok {
				t.Error("RateLimit fields for a key without a rate limit")
			}
		})
	}

	t.Run("not ready", func(t *testing.T) {
		c := testChecker(t, idx)
		c.ready.Store(false)
		v := c.Decide(context.Background(), &Request{Authorization: bearerOf(valid), Now: testNow})
		if v.Status != http.StatusServiceUnavailable || v.Code != apicode.NotReady || v.RetryAfter() != "1" || v.Key() != nil {
			t.Errorf("before the index synced: %d %s, Retry-After %q, key %v", v.Status, v.Code, v.RetryAfter(), v.Key())
		}
	})
}

// TestFailuresAreLimitedValidKeysAreNot: an address out of failures gets 429 RATE_LIMITED with
// Retry-After, for failures only: a valid key from it is allowed, and other addresses fail as
// before.
func TestFailuresAreLimitedValidKeysAreNot(t *testing.T) {
	idx, keys := testIndex(t, switchboardv1alpha1.APIKeySpec{})
	c := testChecker(t, idx)
	guesser := netip.MustParseAddr("203.0.113.9")
	decide := func(auth []string, addr netip.Addr) Verdict {
		return c.Decide(context.Background(), &Request{Authorization: auth, Addr: addr, AddrKnown: true, Now: testNow})
	}
	for i := range 3 {
		if v := decide(bearerOf("sb_live_guess"), guesser); v.Status != http.StatusUnauthorized {
			t.Fatalf("failure %d within the burst: %d %s", i+1, v.Status, v.Code)
		}
	}
	v := decide(nil, guesser)
	if v.Status != http.StatusTooManyRequests || v.Code != apicode.RateLimited || v.RetryAfter() != "1" || v.Challenge != "" {
		t.Errorf("a failure past the burst: %d %s, Retry-After %q, challenge %q", v.Status, v.Code, v.RetryAfter(), v.Challenge)
	}
	if v := decide(bearerOf(keys[0]), guesser); !v.Allowed() {
		t.Errorf("a valid key from the limited address: %d %s", v.Status, v.Code)
	}
	if v := decide(bearerOf("sb_live_guess"), netip.MustParseAddr("203.0.113.10")); v.Status != http.StatusUnauthorized {
		t.Errorf("another address's first failure: %d %s", v.Status, v.Code)
	}
}

// TestKeyRateLimit: a key's rate limit allows its budget, then refuses with 429
// API_KEY_RATE_LIMITED and Retry-After; every verdict the limiter made carries the RateLimit
// fields, and a key used outside its audience spends nothing.
func TestKeyRateLimit(t *testing.T) {
	spec := switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{"connections"},
		RateLimit: &switchboardv1alpha1.APIKeyRateLimit{Requests: 2, Period: metav1.Duration{Duration: time.Hour}}}
	idx, keys := testIndex(t, spec)
	c := testChecker(t, idx)
	decide := func(audience string) Verdict {
		return c.Decide(context.Background(), &Request{Authorization: bearerOf(keys[0]), Audience: audience, Now: testNow})
	}
	if v := decide("billing"); v.Code != apicode.AudienceNotAllowed {
		t.Fatalf("outside its audience: %d %s", v.Status, v.Code)
	}
	for i, want := range []string{`"apikey";r=1;t=1800`, `"apikey";r=0;t=1800`} {
		v := decide("connections")
		policy, current, ok := v.RateLimitFields()
		if !v.Allowed() || !ok || policy != `"apikey";q=2;w=3600` || current != want {
			t.Errorf("request %d of the budget: %d %s, fields %q %q %v; want 200, %q", i+1, v.Status, v.Code, policy, current, ok, want)
		}
	}
	v := decide("connections")
	h := http.Header{}
	v.SetRateLimitHeaders(h)
	v.SetDenialHeaders(h)
	if v.Status != http.StatusTooManyRequests || v.Code != apicode.KeyRateLimited || h.Get("Retry-After") != "1800" || h.Get("Ratelimit") != `"apikey";r=0;t=1800` {
		t.Errorf("past the budget: %d %s, header %v", v.Status, v.Code, h)
	}
}

// TestKeyWithoutPolicyNeverConsultsTheLimiter decides for a key without a policy with no
// limiter at all: consulting it would panic.
func TestKeyWithoutPolicyNeverConsultsTheLimiter(t *testing.T) {
	idx, keys := testIndex(t, switchboardv1alpha1.APIKeySpec{})
	c := testChecker(t, idx)
	c.keys = nil
	v := c.Decide(context.Background(), &Request{Authorization: bearerOf(keys[0]), Now: testNow})
	h := http.Header{}
	v.SetRateLimitHeaders(h)
	if v.Status != http.StatusOK || h.Get("RateLimit") != "" {
		t.Fatalf("a key without a policy: %d, RateLimit %q", v.Status, h.Get("RateLimit"))
	}
}

// TestDecideDoesNotAllocate: the decision allocates nothing, allowed or refused, for keys with
// and without a policy (permissions without conditions included: a rule's refusal is written
// when it is compiled).
func TestDecideDoesNotAllocate(t *testing.T) {
	limited := switchboardv1alpha1.APIKeySpec{RateLimit: &switchboardv1alpha1.APIKeyRateLimit{Requests: switchboardv1alpha1.RateLimitMaxRequests, Period: metav1.Duration{Duration: time.Second}},
		AllowedSourceRanges: []switchboardv1alpha1.CIDR{"192.0.2.0/24"}}
	permitted := switchboardv1alpha1.APIKeySpec{Permissions: []switchboardv1alpha1.PermissionRule{
		{Effect: switchboardv1alpha1.PermissionDeny, Methods: []switchboardv1alpha1.HTTPMethod{"DELETE"}, Paths: []string{"/v1/connections/{id}"}},
		{Effect: switchboardv1alpha1.PermissionAllow, Methods: []switchboardv1alpha1.HTTPMethod{"GET"}, Paths: []string{"/v1/**"}},
	}}
	idx, keys := testIndex(t, switchboardv1alpha1.APIKeySpec{}, limited, permitted)
	c := testChecker(t, idx)
	r := httptest.NewRequest(http.MethodGet, "/v1/connections", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	r.Header.Set("X-Forwarded-For", "192.0.2.1, 10.0.0.2")
	for name, req := range map[string]Request{
		"valid":         {Authorization: bearerOf(keys[0]), HTTP: r},
		"policy":        {Authorization: bearerOf(keys[1]), HTTP: r},
		"wrong address": {Authorization: bearerOf(keys[1]), Addr: netip.MustParseAddr("198.51.100.1"), AddrKnown: true},
		"permitted":     {Authorization: bearerOf(keys[2]), HTTP: r, Method: http.MethodGet, Path: "/v1/connections"},
		"denied by one": {Authorization: bearerOf(keys[2]), HTTP: r, Method: http.MethodDelete, Path: "/v1/connections/c1"},
		"invalid":       {Authorization: bearerOf(keys[0][:len(keys[0])-1] + "x"), HTTP: r},
		"missing":       {HTTP: r},
	} {
		req.Now = testNow
		c.Decide(context.Background(), &req) // a limiter's first sight of a key or an address takes its entry
		if allocs := testing.AllocsPerRun(1000, func() { c.Decide(context.Background(), &req) }); allocs != 0 {
			t.Errorf("%s: Decide allocates %v times per call", name, allocs)
		}
	}
}

// TestAuthenticateDoesNotAllocate verifies the zero-allocation claim of the auth path.
func TestAuthenticateDoesNotAllocate(t *testing.T) {
	idx, keys := testIndex(t, make([]switchboardv1alpha1.APIKeySpec, 100)...)
	key := keys[len(keys)-1]
	header := http.Header{"Authorization": {"Bearer " + key}}
	if out := authenticate(idx, "sb", header["Authorization"], testNow); out.code != "" {
		t.Fatalf("the key does not authenticate: %s", out.code)
	}
	bad := http.Header{"Authorization": {"Bearer " + key[:len(key)-1] + "x"}}
	for name, hdr := range map[string]http.Header{"valid": header, "invalid": bad, "missing": {}} {
		if allocs := testing.AllocsPerRun(1000, func() { authenticate(idx, "sb", hdr["Authorization"], testNow) }); allocs != 0 {
			t.Errorf("%s: authenticate allocates %v times per call", name, allocs)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/v1/connections", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 10.0.0.2")
	if allocs := testing.AllocsPerRun(1000, func() { clientAddress(r, trustedLoopback) }); allocs != 0 {
		t.Errorf("clientAddress allocates %v times per call", allocs)
	}
}

// BenchmarkAuthenticate measures parse → checksum → SHA-256 → lookup → state check over an
// index of 10,000 keys.
func BenchmarkAuthenticate(b *testing.B) {
	idx, keys := testIndex(b, make([]switchboardv1alpha1.APIKeySpec, 10000)...)
	header := http.Header{"Authorization": {"Bearer " + keys[len(keys)-1]}}
	b.ReportAllocs()
	for b.Loop() {
		if out := authenticate(idx, "sb", header["Authorization"], testNow); out.code != "" {
			b.Fatal(out.code)
		}
	}
}

// BenchmarkDecide measures the whole decision of an allowed request over an index of 10,000
// keys: authenticate, then a key without a policy, with source ranges and a rate limit (never
// reached) decided in memory, or with the most permissions rules a key may have.
func BenchmarkDecide(b *testing.B) {
	limited := switchboardv1alpha1.APIKeySpec{RateLimit: &switchboardv1alpha1.APIKeyRateLimit{Requests: switchboardv1alpha1.RateLimitMaxRequests, Period: metav1.Duration{Duration: time.Second}},
		AllowedSourceRanges: []switchboardv1alpha1.CIDR{"10.0.0.0/8", "172.16.0.0/12", "2001:db8::/32", "192.0.2.0/24"}}
	// The most rules a key may have (32), the request matched by the last: the cost the issue
	// bounds (it asks of 50 rules; the schema allows 32 of a key's own).
	var rules []switchboardv1alpha1.PermissionRule
	for i := range switchboardv1alpha1.MaxPermissionRules - 1 {
		rules = append(rules, switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny,
			Methods: []switchboardv1alpha1.HTTPMethod{"DELETE", "PUT"}, Paths: []string{fmt.Sprintf("/v1/items%d/{id}/**", i)}})
	}
	rules = append(rules, switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow,
		Methods: []switchboardv1alpha1.HTTPMethod{"GET"}, Paths: []string{"/v1/connections"}})
	specs := make([]switchboardv1alpha1.APIKeySpec, 10000)
	specs[len(specs)-1] = limited
	specs[len(specs)-2] = switchboardv1alpha1.APIKeySpec{Permissions: rules}
	idx, keys := testIndex(b, specs...)
	ready := &atomic.Bool{}
	ready.Store(true)
	c, err := New(Config{Index: idx, Ready: ready, KeyPrefix: "sb", FailureRate: 1, FailureBurst: 20, FailureClients: 1024})
	if err != nil {
		b.Fatal(err)
	}
	for name, key := range map[string]string{"policy=none": keys[0], "policy=sources+rate": keys[len(keys)-1], "policy=32rules": keys[len(keys)-2]} {
		b.Run(name, func(b *testing.B) {
			// The proofs as /v1 hands them over: a key without a binding never reads them.
			r := httptest.NewRequest(http.MethodGet, "/v1/connections", nil)
			req := Request{Authorization: bearerOf(key), Addr: netip.MustParseAddr("192.0.2.1"), AddrKnown: true, Method: http.MethodGet, Path: "/v1/connections",
				Proofs: HTTPProofs{Request: r}}
			b.ReportAllocs()
			for b.Loop() {
				req.Now = c.Now(time.Now())
				if v := c.Decide(context.Background(), &req); !v.Allowed() {
					b.Fatal(v.Code)
				}
			}
		})
	}
}

// TestPermissions: after audience and sources, a key's permissions decide with the request's
// method and path: a refusal is 403 API_KEY_PERMISSION_DENIED naming the rule (index and text),
// or saying none allowed the request, and never consults the limiter.
func TestPermissions(t *testing.T) {
	spec := switchboardv1alpha1.APIKeySpec{
		RateLimit: &switchboardv1alpha1.APIKeyRateLimit{Requests: 1, Period: metav1.Duration{Duration: time.Hour}},
		Permissions: []switchboardv1alpha1.PermissionRule{
			{Effect: switchboardv1alpha1.PermissionDeny, Methods: []switchboardv1alpha1.HTTPMethod{"DELETE"}, Paths: []string{"/v1/connections/{id}"}},
			{Effect: switchboardv1alpha1.PermissionAllow, Methods: []switchboardv1alpha1.HTTPMethod{"GET"}, Paths: []string{"/v1/**"}},
		}}
	idx, keys := testIndex(t, spec)
	c := testChecker(t, idx)
	ask := func(method, path string) Verdict {
		return c.Decide(context.Background(), &Request{Authorization: bearerOf(keys[0]), Addr: netip.MustParseAddr("192.0.2.1"), AddrKnown: true,
			Method: method, Path: path, Now: testNow})
	}
	for range 3 {
		v := ask(http.MethodDelete, "/v1/connections/c1")
		index, text, ok := v.PermissionRule()
		if v.Status != http.StatusForbidden || v.Code != apicode.PermissionDenied || v.Message != "refused by permissions rule 0 (deny DELETE /v1/connections/{id})" ||
			!ok || index != "0" || text != "deny DELETE /v1/connections/{id}" {
			t.Fatalf("a denied DELETE: %+v, rule %q %q %v", v, index, text, ok)
		}
	}
	v := ask(http.MethodPost, "/v1/connections")
	if _, _, ok := v.PermissionRule(); v.Code != apicode.PermissionDenied || v.Message != "no permissions rule allows POST /v1/connections" || ok {
		t.Fatalf("a POST no rule allows: %+v", v)
	}
	// The refusals took nothing from the budget of one: the GET has it.
	if v := ask(http.MethodGet, "/v1/connections"); !v.Allowed() {
		t.Fatalf("the GET after the refusals: %+v", v)
	}
}
