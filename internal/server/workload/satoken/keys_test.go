//go:build !unit

package satoken_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/server/workload/satoken"
)

// keyServer serves an OIDC discovery and key set of the test's choosing, as an API server
// would: for what envtest's cannot show (an ES256 cluster, another issuer, keys unavailable).
type keyServer struct {
	mu     sync.Mutex
	issuer string
	keys   []jose.JSONWebKey
	broken bool
}

func (s *keyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	var doc any
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		doc = map[string]string{"issuer": s.issuer, "jwks_uri": "https://elsewhere.example/keys"}
	case "/openid/v1/jwks":
		doc = jose.JSONWebKeySet{Keys: s.keys}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

func (s *keyServer) set(f func(*keyServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func keyServerVerifier(t *testing.T, s *keyServer, clk *clocktesting.FakeClock) *satoken.Verifier {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	v, err := satoken.New(satoken.Options{Audience: audience, Client: cs.Discovery().RESTClient(), Pods: pods, Clock: clk,
		RefetchInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// claimsFor are the claims the API server would write for w's pod, issued at iat.
func claimsFor(w *workload, issuer string, iat time.Time) map[string]any {
	return map[string]any{
		"iss": issuer, "aud": []string{audience}, "sub": "system:serviceaccount:" + w.ns + ":" + w.sa.Name,
		"iat": iat.Unix(), "nbf": iat.Unix(), "exp": iat.Add(time.Hour).Unix(),
		"kubernetes.io": map[string]any{
			"namespace":      w.ns,
			"serviceaccount": map[string]any{"name": w.sa.Name, "uid": string(w.sa.UID)},
			"pod":            map[string]any{"name": w.pod.Name, "uid": string(w.pod.UID)},
		},
	}
}

func TestES256ClusterAndItsIssuer(t *testing.T) {
	w := newWorkload(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://oidc.cluster.example"
	s := &keyServer{issuer: issuer, keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "ec-1", Algorithm: "ES256", Use: "sig"}}}
	iat := time.Unix(1_800_000_000, 0)
	clk := clocktesting.NewFakeClock(iat)
	v := keyServerVerifier(t, s, clk)
	if err := v.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "ec-1"))
	if err != nil {
		t.Fatal(err)
	}

	if got, err := v.Verify(ctxFor(t), sign(t, signer, claimsFor(w, issuer, iat))); err != nil || got.PodUID != w.pod.UID || got.Node != "" {
		t.Fatalf("an ES256 token: %+v, %v", got, err)
	}
	other := claimsFor(w, "https://another-issuer.example", iat)
	refused(t, v, sign(t, signer, other), satoken.ReasonWrongIssuer)

	noExp := claimsFor(w, issuer, iat)
	delete(noExp, "exp")
	refused(t, v, sign(t, signer, noExp), satoken.ReasonMalformed)

	otherSub := claimsFor(w, issuer, iat)
	otherSub["sub"] = "system:serviceaccount:kube-system:default"
	refused(t, v, sign(t, signer, otherSub), satoken.ReasonMalformed)

	noKubernetes := claimsFor(w, issuer, iat)
	delete(noKubernetes, "kubernetes.io")
	refused(t, v, sign(t, signer, noKubernetes), satoken.ReasonMalformed)

	badAud := claimsFor(w, issuer, iat)
	badAud["aud"] = 42
	refused(t, v, sign(t, signer, badAud), satoken.ReasonMalformed)

	// The key signs ES256 only: a token claiming RS256 under its id is refused.
	rsaSigned := sign(t, rsaSigner(t, "ec-1"), claimsFor(w, issuer, iat))
	refused(t, v, rsaSigned, satoken.ReasonBadSignature)
}

// Keys unavailable at start: tokens are refused (unknown_key), and accepted once the keys can
// be fetched again, within the fetch budget.
func TestKeysUnavailableAtStart(t *testing.T) {
	w := newWorkload(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://oidc.cluster.example"
	s := &keyServer{issuer: issuer, keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "ec-1"}}, broken: true}
	iat := time.Unix(1_800_000_000, 0)
	clk := clocktesting.NewFakeClock(iat)
	v := keyServerVerifier(t, s, clk)
	if err := v.Start(ctxFor(t)); err == nil {
		t.Fatal("Start succeeded with the keys unavailable")
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "ec-1"))
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, signer, claimsFor(w, issuer, iat))
	refused(t, v, tok, satoken.ReasonUnknownKey)
	s.set(func(s *keyServer) { s.broken = false })
	refused(t, v, tok, satoken.ReasonUnknownKey) // within RefetchInterval of the failed fetch
	if n := v.KeyFetches(); n != 1 {
		t.Fatalf("%d fetches; want 1 (the failed one at start)", n)
	}
	clk.Step(10 * time.Second)
	if _, err := v.Verify(ctxFor(t), tok); err != nil {
		t.Fatal(err)
	}
	if n := v.KeyFetches(); n != 2 {
		t.Fatalf("%d fetches; want 2", n)
	}
}

// A key set with no key the API server would sign with is an error, not an empty trust.
func TestUnusableKeysAreRefused(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // the point: too short to trust
	if err != nil {
		t.Fatal(err)
	}
	ec384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	good, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := &keyServer{issuer: "https://oidc.cluster.example", keys: []jose.JSONWebKey{
		{Key: small.Public(), KeyID: "rsa-1024"},
		{Key: ec384.Public(), KeyID: "p-384"},
		{Key: []byte("a shared secret"), KeyID: "hmac", Algorithm: "HS256"},
		{Key: good.Public(), KeyID: "for-encryption", Use: "enc"},
		{Key: good.Public()}, // no key id
	}}
	v := keyServerVerifier(t, s, clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)))
	err = v.Start(ctxFor(t))
	if err == nil || !strings.Contains(err.Error(), "no usable signing key") {
		t.Fatalf("Start: %v; want no usable signing key", err)
	}
}

// A key the cluster stops publishing (rotated out) is not trusted past KeyMaxAge, nor a token
// it signed past CacheMaxAge; tokens of the new key are.
func TestRotatedOutKeyIsDropped(t *testing.T) {
	w := newWorkload(t)
	oldKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://oidc.cluster.example"
	s := &keyServer{issuer: issuer, keys: []jose.JSONWebKey{{Key: oldKey.Public(), KeyID: "old"}}}
	iat := time.Unix(1_800_000_000, 0)
	clk := clocktesting.NewFakeClock(iat)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	v, err := satoken.New(satoken.Options{Audience: audience, Client: cs.Discovery().RESTClient(), Pods: pods, Clock: clk,
		KeyMaxAge: 5 * time.Minute, CacheMaxAge: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	signed := func(key *ecdsa.PrivateKey, kid string) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid))
		if err != nil {
			t.Fatal(err)
		}
		return sign(t, signer, claimsFor(w, issuer, iat))
	}
	cached, unseen := signed(oldKey, "old"), signed(oldKey, "old")
	if _, err := v.Verify(ctxFor(t), cached); err != nil {
		t.Fatal(err)
	}
	s.set(func(s *keyServer) { s.keys = []jose.JSONWebKey{{Key: newKey.Public(), KeyID: "new"}} })
	clk.Step(5*time.Minute + time.Second)
	refused(t, v, cached, satoken.ReasonUnknownKey)
	refused(t, v, unseen, satoken.ReasonUnknownKey)
	if _, err := v.Verify(ctxFor(t), signed(newKey, "new")); err != nil {
		t.Fatal(err)
	}
}
