//go:build !unit

package panel_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	ptr "k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

// fromAddress returns a visitor whose connections come from ip (any 127.0.0.0/8 address is
// this host's loopback), so that a test can be two clients.
func fromAddress(t *testing.T, srv *httptest.Server, ip string) *visitor {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return newVisitorAt(t, srv.URL, &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		},
	}})
}

// TestLoginFloodIsThrottledPerAddress performs a sign-in flood from one address: past the
// burst every attempt is refused with 429 before any TokenReview is made (so even a valid
// token is refused then), while another address signs in as usual.
func TestLoginFloodIsThrottledPerAddress(t *testing.T) {
	ns := env.Namespace(t, "login-flood")
	token := grant(t, ns, "owner", ownerRules)
	srv := startPanel(t, &configv1alpha1.PanelSettings{LoginBurst: ptr.To[int32](3), LoginRate: ptr.To(0.001)}, panel.Deps{})

	attacker := fromAddress(t, srv, "127.0.0.1")
	for i := range 3 {
		attacker.get("/login")
		if p := attacker.postCSRF("/login", url.Values{"token": {"guess-" + string(rune('a'+i))}}); p.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d within the burst: %d %q, want 401", i, p.status, errorLine(p.body))
		}
	}
	attacker.get("/login")
	p := attacker.postCSRF("/login", url.Values{"token": {token}})
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" || !strings.Contains(errorLine(p.body), "Too many sign-in attempts") {
		t.Fatalf("attempt past the burst: %d, Retry-After %q, %q; want 429", p.status, p.header.Get("Retry-After"), errorLine(p.body))
	}
	// The valid token was not even reviewed: no session came of it.
	if p := attacker.get("/keys?namespace=" + ns); p.url.Path != "/login" {
		t.Fatalf("a throttled sign-in opened a session: %s", p.url)
	}

	other := fromAddress(t, srv, "127.0.0.2")
	other.signIn(token, ns)
}

// TestSessionFloodIsCapped performs a session flood with real tokens: one user signing in over
// and over holds at most MaxSessionsPerUser sessions (their least recently used end), and all
// users together at most MaxSessions (further sign-ins are refused; nobody is signed out).
func TestSessionFloodIsCapped(t *testing.T) {
	ns := env.Namespace(t, "session-flood")
	mallory := grant(t, ns, "mallory", ownerRules)
	srv := startPanel(t, &configv1alpha1.PanelSettings{MaxSessions: ptr.To[int32](3), MaxSessionsPerUser: ptr.To[int32](2)}, panel.Deps{})

	var floods []*visitor
	for range 5 {
		v := newVisitor(t, srv)
		v.signIn(mallory, ns)
		floods = append(floods, v)
	}
	for i, v := range floods {
		p := v.get("/keys?namespace=" + ns)
		if alive := p.url.Path == "/keys"; alive != (i >= 3) {
			t.Fatalf("session %d of one user: alive %v (at %s); want only the last 2 alive", i, alive, p.url)
		}
	}

	alice := newVisitor(t, srv)
	alice.signIn(grant(t, ns, "alice", ownerRules), ns) // the store's third and last session
	bob := newVisitor(t, srv)
	bob.get("/login")
	p := bob.postCSRF("/login", url.Values{"token": {grant(t, ns, "bob", ownerRules)}})
	if p.status != http.StatusServiceUnavailable || !strings.Contains(errorLine(p.body), "as many people signed in as it can hold") {
		t.Fatalf("a sign-in past MaxSessions: %d %q, want 503", p.status, errorLine(p.body))
	}
	for name, v := range map[string]*visitor{"alice": alice, "mallory's newest": floods[4]} {
		if p := v.get("/keys?namespace=" + ns); p.url.Path != "/keys" {
			t.Fatalf("%s was signed out by a refused sign-in: %s", name, p.url)
		}
	}
}
