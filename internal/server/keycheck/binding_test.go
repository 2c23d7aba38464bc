package keycheck

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop/dpoptest"
	"github.com/switchboard-dev/switchboard/internal/server/workload/satoken"
)

// fakeTokens verifies the tokens it was given, as satoken would: the real verifier is tested
// with real tokens in internal/server/workload/satoken and, wired, in internal/server.
type fakeTokens map[string]satoken.Workload

func (f fakeTokens) Verify(_ context.Context, token string) (satoken.Workload, error) {
	if w, ok := f[token]; ok {
		return w, nil
	}
	return satoken.Workload{}, &satoken.Error{Reason: satoken.ReasonBadSignature, TokenHash: "-"}
}

// proofs are a request's proofs as a protocol hands them over.
type proofs struct{ token, dpop, url, peer string }

func (p proofs) WorkloadToken() string { return p.token }
func (p proofs) DPoP() string          { return p.dpop }
func (p proofs) URL() string           { return p.url }
func (p proofs) PeerPrincipal() string { return p.peer }

// boundIndex is an index of one key per binding, in namespace "tenant", each with the rate
// limit spec gives it.
func boundIndex(t testing.TB, spec switchboardv1alpha1.APIKeySpec, bindings ...keysecret.Binding) (*keyindex.Index, []string) {
	t.Helper()
	idx := keyindex.New()
	keys := make([]string, len(bindings))
	for i, b := range bindings {
		key, err := apikey.Generate("sb")
		if err != nil {
			t.Fatal(err)
		}
		uid := types.UID("bound-" + string(rune('a'+i)))
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: string(uid), UID: uid}, Spec: spec}
		if err := keyindextest.PutBoundKey(idx, ak, key, b); err != nil {
			t.Fatal(err)
		}
		keys[i] = key
	}
	return idx, keys
}

func boundChecker(t testing.TB, idx *keyindex.Index, tokens TokenVerifier) *Checker {
	t.Helper()
	ready := &atomic.Bool{}
	ready.Store(true)
	c, err := New(Config{Index: idx, Ready: ready, KeyPrefix: "sb", Clock: clocktesting.NewFakePassiveClock(testNow),
		FailureRate: 1, FailureBurst: 3, FailureClients: 1024, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const apiURL = "https://api.example.com/v1/connections"

// TestBindingEnforce: a key bound in mode Enforce is answered only with a proof of a bound
// workload (a token of a bound ServiceAccount of its namespace, or whose SPIFFE ID is bound; the
// gateway's peer principal; a DPoP proof of a bound key), else 403 API_KEY_WRONG_WORKLOAD whose
// message names no workload; and the refusals spend none of its budget (one request an hour).
func TestBindingEnforce(t *testing.T) {
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	binding := keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"},
		SPIFFEIDs:  []string{"spiffe://cluster.local/ns/tenant/sa/mesh", "spiffe://cluster.local/ns/tenant/sa/spiffed"},
		PublicKeys: []string{dpoptest.Thumbprint(&signer.PublicKey)}}
	oneAnHour := switchboardv1alpha1.APIKeySpec{RateLimit: &switchboardv1alpha1.APIKeyRateLimit{Requests: 1, Period: metav1.Duration{Duration: time.Hour}}}
	idx, keys := boundIndex(t, oneAnHour, binding)
	key := keys[0]
	tokens := fakeTokens{
		"web":       {Namespace: "tenant", ServiceAccount: "web"},
		"api":       {Namespace: "tenant", ServiceAccount: "api"},
		"elsewhere": {Namespace: "other", ServiceAccount: "web"},
		"spiffed":   {Namespace: "tenant", ServiceAccount: "spiffed"},
	}
	c := boundChecker(t, idx, tokens)
	proof := func(k *ecdsa.PrivateKey, method, url string) string {
		p, err := dpoptest.Make(k, dpoptest.Claims{Method: method, URL: url, APIKey: key, IssuedAt: testNow})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ask := func(p Proofs) Verdict {
		return c.Decide(context.Background(), &Request{Authorization: bearerOf(key), Method: http.MethodGet, Path: "/v1/connections", Now: testNow, Proofs: p})
	}
	refusals := []struct {
		name   string
		proofs Proofs
	}{
		{"no proof at all", nil},
		{"no proof", proofs{url: apiURL}},
		{"a token that does not verify", proofs{token: "forged"}},
		{"another ServiceAccount's token", proofs{token: "api"}},
		{"a token of another namespace's ServiceAccount web", proofs{token: "elsewhere"}},
		{"another peer", proofs{peer: "spiffe://cluster.local/ns/tenant/sa/api"}},
		{"another key's proof", proofs{dpop: proof(other, http.MethodGet, apiURL), url: apiURL}},
		{"a proof for another method", proofs{dpop: proof(signer, http.MethodPost, apiURL), url: apiURL}},
		{"a proof for another URL", proofs{dpop: proof(signer, http.MethodGet, "https://api.example.com/v1/other"), url: apiURL}},
	}
	for _, r := range refusals {
		v := ask(r.proofs)
		if v.Status != http.StatusForbidden || v.Code != apicode.KeyWrongWorkload || v.Message != msgWrongWorkload {
			t.Errorf("%s: %d %s %q, want 403 %s", r.name, v.Status, v.Code, v.Message, apicode.KeyWrongWorkload)
		}
		for _, secret := range []string{"web", "mesh", "spiffe", binding.PublicKeys[0]} {
			if strings.Contains(v.Message, " "+secret) {
				t.Errorf("%s: the refusal names %q: %q", r.name, secret, v.Message)
			}
		}
	}
	// None of them is a use of the key: lastUsedAt (unused keys' revocation, grace evidence)
	// moves for a proven request alone.
	indexed, _ := idx.Lookup(ptr(apikey.Sum(key)), testNow)
	if used := indexed.Usage().LastUsed(); !used.IsZero() {
		t.Errorf("refused for their workload, the requests marked the key used at %s", used)
	}
	// None of them spent the budget of one: the first proven request has it, the second not.
	if v := ask(proofs{token: "web"}); !v.Allowed() {
		t.Fatalf("web's token after the refusals: %d %s", v.Status, v.Code)
	}
	if v := ask(proofs{token: "web"}); v.Code != apicode.KeyRateLimited {
		t.Fatalf("web's second request: %d %s, want the rate limit's 429", v.Status, v.Code)
	}
	if used := indexed.Usage().LastUsed(); !used.Equal(testNow) {
		t.Errorf("after web's requests the key was last used at %s, want %s", used, testNow)
	}

	// Each proof, on a key without a budget.
	idx, keys = boundIndex(t, switchboardv1alpha1.APIKeySpec{}, binding)
	key = keys[0]
	c = boundChecker(t, idx, tokens)
	replayed := proof(signer, http.MethodGet, apiURL)
	for _, p := range []struct {
		name   string
		proofs Proofs
	}{
		{"web's token", proofs{token: "web"}},
		{"a token whose SPIFFE ID is bound", proofs{token: "spiffed"}},
		{"a bound peer", proofs{peer: "spiffe://cluster.local/ns/tenant/sa/mesh"}},
		{"a proof of the bound key", proofs{dpop: replayed, url: apiURL}},
		{"a refused token, then a bound peer", proofs{token: "api", peer: "spiffe://cluster.local/ns/tenant/sa/mesh"}},
	} {
		if v := ask(p.proofs); !v.Allowed() {
			t.Errorf("%s: %d %s, want it allowed", p.name, v.Status, v.Code)
		}
	}
	if v := ask(proofs{dpop: replayed, url: apiURL}); v.Code != apicode.KeyWrongWorkload {
		t.Errorf("the proof replayed: %d %s, want 403 %s", v.Status, v.Code, apicode.KeyWrongWorkload)
	}
	// A proof made for another API key (ath) proves nothing for this one.
	_, otherKeys := boundIndex(t, switchboardv1alpha1.APIKeySpec{}, binding)
	forOther, err := dpoptest.Make(signer, dpoptest.Claims{Method: http.MethodGet, URL: apiURL, APIKey: otherKeys[0], IssuedAt: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if v := ask(proofs{dpop: forOther, url: apiURL}); v.Code != apicode.KeyWrongWorkload {
		t.Errorf("a proof for another API key: %d %s", v.Status, v.Code)
	}
}

// TestBindingReportOnly: mode ReportOnly admits every request, and records who presented the
// key (bound or not, by principal and address, at most 8, the most recent) and how many proved
// no bound workload.
func TestBindingReportOnly(t *testing.T) {
	idx, keys := boundIndex(t, switchboardv1alpha1.APIKeySpec{},
		keysecret.Binding{Mode: switchboardv1alpha1.BindingReportOnly, ServiceAccounts: []string{"web"}})
	c := boundChecker(t, idx, fakeTokens{"web": {Namespace: "tenant", ServiceAccount: "web"}, "api": {Namespace: "tenant", ServiceAccount: "api"}})
	now := testNow
	ask := func(p Proofs, addr string) {
		t.Helper()
		now = now.Add(time.Second)
		v := c.Decide(context.Background(), &Request{Authorization: bearerOf(keys[0]), Addr: netip.MustParseAddr(addr), AddrKnown: true, Now: now, Proofs: p})
		if !v.Allowed() {
			t.Fatalf("ReportOnly refused: %d %s", v.Status, v.Code)
		}
	}
	ask(proofs{token: "web"}, "10.0.0.1")
	ask(proofs{token: "web"}, "10.0.0.1")
	ask(proofs{token: "api"}, "10.0.0.2")
	ask(nil, "10.0.0.3")
	key, _ := idx.Lookup(ptr(apikey.Sum(keys[0])), testNow)
	snap := key.Usage().BindingSeen().Snapshot()
	if snap.Misuses != 2 || !snap.LastMisuse.Equal(now) || len(snap.Presenters) != 3 {
		t.Fatalf("recorded %+v, want 2 misuses (the last now) by 3 presenters", snap)
	}
	want := map[string]keyindex.PresenterUse{
		"system:serviceaccount:tenant:web/10.0.0.1": {Requests: 2, Presenter: keyindex.Presenter{Bound: true}},
		"system:serviceaccount:tenant:api/10.0.0.2": {Requests: 1},
		"/10.0.0.3": {Requests: 1},
	}
	for _, p := range snap.Presenters {
		w, ok := want[p.Principal()+"/"+p.Address.String()]
		if !ok || w.Requests != p.Requests || w.Bound != p.Bound {
			t.Errorf("presenter %s at %s: %d requests, bound %v; want %+v", p.Principal(), p.Address, p.Requests, p.Bound, w)
		}
	}
	// Twelve more addresses: the record keeps 8, the most recent.
	for i := range 12 {
		ask(nil, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}).String())
	}
	snap = key.Usage().BindingSeen().Snapshot()
	if len(snap.Presenters) != switchboardv1alpha1.MaxBindingPresenters || snap.Misuses != 14 {
		t.Fatalf("after 12 more: %d presenters, %d misuses; want 8 and 14", len(snap.Presenters), snap.Misuses)
	}
	for _, p := range snap.Presenters {
		if a := p.Address.As4(); a[0] != 192 || a[3] < 4 {
			t.Errorf("kept %s, not among the 8 most recent", p.Address)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestBindingCostsBearerKeysNothing: a key without a binding, its request carrying the proofs
// as /v1 hands them over, is decided without an allocation and without reading them.
func TestBindingCostsBearerKeysNothing(t *testing.T) {
	idx, keys := testIndex(t, switchboardv1alpha1.APIKeySpec{})
	c := boundChecker(t, idx, fakeTokens{})
	r := httptest.NewRequest(http.MethodGet, "/v1/connections", nil)
	r.Header.Set(HeaderWorkloadToken, "web")
	req := Request{Authorization: bearerOf(keys[0]), HTTP: r, Now: testNow, Proofs: HTTPProofs{Request: r}}
	if allocs := testing.AllocsPerRun(1000, func() {
		if v := c.Decide(context.Background(), &req); !v.Allowed() {
			t.Fatal(v.Code)
		}
	}); allocs != 0 {
		t.Errorf("a bearer key's decision allocates %v times", allocs)
	}
	key, _ := idx.Lookup(ptr(apikey.Sum(keys[0])), testNow)
	if key.Usage().BindingSeen() != nil {
		t.Error("a bearer key has a record of presenters")
	}
}

// BenchmarkDecideBound measures the decision of a bound key proven by a token the verifier
// answers from memory (satoken's cache hit is measured with it in internal/server).
func BenchmarkDecideBound(b *testing.B) {
	idx, keys := boundIndex(b, switchboardv1alpha1.APIKeySpec{}, keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}})
	c := boundChecker(b, idx, fakeTokens{"web": {Namespace: "tenant", ServiceAccount: "web"}})
	req := Request{Authorization: bearerOf(keys[0]), Addr: netip.MustParseAddr("192.0.2.1"), AddrKnown: true, Now: testNow, Proofs: proofs{token: "web"}}
	b.ReportAllocs()
	for b.Loop() {
		if v := c.Decide(context.Background(), &req); !v.Allowed() {
			b.Fatal(v.Code)
		}
	}
}

// TestHeaderKeys: the header fields are looked up as http.Header keys them.
func TestHeaderKeys(t *testing.T) {
	if canonicalDPoP != http.CanonicalHeaderKey(HeaderDPoP) || HeaderWorkloadToken != http.CanonicalHeaderKey(HeaderWorkloadToken) {
		t.Errorf("%q and %q are not the canonical keys of %q and %q", canonicalDPoP, HeaderWorkloadToken, HeaderDPoP, HeaderWorkloadToken)
	}
}
