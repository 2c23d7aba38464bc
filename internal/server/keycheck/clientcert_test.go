package keycheck

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

// TestBindingClientCertHeader: on an HTTP request (/v1, forward-auth) the SPIFFE ID of the
// client-certificate header proves a bound peer only when the server reads that header and the
// request's peer is a trusted proxy; and only the nearest proxy's element counts.
func TestBindingClientCertHeader(t *testing.T) {
	const (
		mesh     = "spiffe://cluster.local/ns/tenant/sa/mesh"
		other    = "spiffe://cluster.local/ns/tenant/sa/api"
		proxy    = "10.0.0.1:4000"
		stranger = "192.0.2.7:4000"
	)
	binding := keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, SPIFFEIDs: []string{mesh}}
	idx, keys := boundIndex(t, switchboardv1alpha1.APIKeySpec{}, binding)
	checker := func(header string) *Checker {
		ready := &atomic.Bool{}
		ready.Store(true)
		c, err := New(Config{Index: idx, Ready: ready, KeyPrefix: "sb", Clock: clocktesting.NewFakePassiveClock(testNow),
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, ClientCertHeader: header})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	reading, notReading := checker("x-forwarded-client-cert"), checker("")
	ask := func(c *Checker, peer string, xfcc ...string) Verdict {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "http://api.example.com/v1/connections", nil)
		r.RemoteAddr = peer
		r.Header.Set("Authorization", "Bearer "+keys[0])
		for _, v := range xfcc {
			r.Header.Add(DefaultClientCertHeader, v)
		}
		return c.Decide(context.Background(), &Request{Authorization: r.Header["Authorization"], HTTP: r,
			Method: r.Method, Path: r.URL.Path, Now: testNow, Proofs: HTTPProofs{Request: r}})
	}
	element := func(uri string) string {
		return "By=spiffe://cluster.local/ns/edge/sa/gateway;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;Subject=\"CN=x,O=y\";URI=" + uri
	}

	if v := ask(reading, proxy, element(mesh)); !v.Allowed() {
		t.Fatalf("the bound SPIFFE ID from a trusted proxy: %d %s, want it allowed", v.Status, v.Code)
	}
	untrustedBefore := testutil.ToFloat64(clientCertRefusals.WithLabelValues(certUntrusted))
	for _, r := range []struct {
		name string
		c    *Checker
		peer string
		xfcc []string
	}{
		{"the bound SPIFFE ID from a peer not trusted", reading, stranger, []string{element(mesh)}},
		{"the header where the server reads none", notReading, proxy, []string{element(mesh)}},
		{"another SPIFFE ID", reading, proxy, []string{element(other)}},
		{"the bound ID in an earlier proxy's element", reading, proxy, []string{element(mesh) + "," + element(other)}},
		{"the header twice", reading, proxy, []string{element(mesh), element(mesh)}},
		{"no URI SAN", reading, proxy, []string{"Hash=abc"}},
		{"junk", reading, proxy, []string{`URI="` + mesh}},
		{"past the element bound", reading, proxy, []string{strings.Repeat("Hash=h,", 8) + element(mesh)}},
		{"no header", reading, proxy, nil},
	} {
		v := ask(r.c, r.peer, r.xfcc...)
		if v.Status != http.StatusForbidden || v.Code != apicode.KeyWrongWorkload {
			t.Errorf("%s: %d %s, want 403 %s", r.name, v.Status, v.Code, apicode.KeyWrongWorkload)
		}
	}
	if got := testutil.ToFloat64(clientCertRefusals.WithLabelValues(certUntrusted)) - untrustedBefore; got != 1 {
		t.Errorf("untrusted_peer refusals counted %v, want 1", got)
	}
	// A forged element before the nearest proxy's does not hide it.
	if v := ask(reading, proxy, element(other)+","+element(mesh)); !v.Allowed() {
		t.Errorf("the bound SPIFFE ID in the nearest proxy's element: %d %s", v.Status, v.Code)
	}
	// The status records the header's SPIFFE IDs as the peers they are: bound or not.
	key, _ := idx.Lookup(ptr(apikey.Sum(keys[0])), testNow)
	recorded := map[string]bool{}
	for _, p := range key.Usage().BindingSeen().Snapshot().Presenters {
		if p.Kind == keyindex.PrincipalPeer {
			recorded[p.Principal()] = p.Bound
		}
	}
	if bound, ok := recorded[mesh]; !ok || !bound {
		t.Errorf("the bound peer recorded %v (present %v), want bound", bound, ok)
	}
	if bound, ok := recorded[other]; !ok || bound {
		t.Errorf("the other peer recorded %v (present %v), want not bound", bound, ok)
	}
}

// TestClientCertHeaderCanonical: the configured name is looked up as http.Header keys it.
func TestClientCertHeaderCanonical(t *testing.T) {
	if got := canonicalHeader("x-forwarded-client-cert"); got != http.CanonicalHeaderKey(DefaultClientCertHeader) {
		t.Errorf("canonicalHeader = %q", got)
	}
	if canonicalHeader("") != "" {
		t.Error("no header became one")
	}
}
