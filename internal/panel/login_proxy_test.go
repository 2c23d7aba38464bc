//go:build !unit

package panel_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	ptr "k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

// TestSignInLimiterBehindTrustedProxy performs issue 29's sign-in lock-out against a panel with
// single sign-on through the tests' real OpenID Provider, behind a trusted proxy (127.0.0.1,
// its X-Forwarded-For believed as /v1 believes it). An anonymous client looping on GET
// /oidc/login spends only its own bucket, an IPv6 client hopping within its /64 only that
// /64's, and other people behind the same proxy still start signing in; a client that is not
// a trusted proxy (127.0.0.2) is counted by its own address whatever X-Forwarded-For it forges,
// and its forgeries spend nobody else's attempts.
func TestSignInLimiterBehindTrustedProxy(t *testing.T) {
	const burst = 3
	base := oidcPanel(t, provider, configv1alpha1.OIDCModeToken, env.Config,
		&configv1alpha1.PanelSettings{LoginBurst: ptr.To[int32](burst), LoginRate: ptr.To(0.001)}, // nothing is regained during the test
		[]string{"127.0.0.1/32"}, panel.Deps{})
	proxy := clientAt(t, "127.0.0.1")    // the ingress controller
	stranger := clientAt(t, "127.0.0.2") // reaches the panel directly

	// startSignIn reports whether GET /oidc/login, sent by c for the client named by xff (none:
	// no header), went on to the provider (true) or was refused by the limiter (false).
	startSignIn := func(what string, c *http.Client, xff string) bool {
		t.Helper()
		req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, base+"/oidc/login", nil)
		if err != nil {
			t.Fatal(err)
		}
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: GET /oidc/login: %v", what, err)
		}
		_ = resp.Body.Close()
		switch loc := resp.Header.Get("Location"); {
		case resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(loc, provider.IssuerURL+"/"):
			return true
		case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
			return false
		default:
			t.Fatalf("%s: GET /oidc/login: %d, Location %q; want 303 to the provider or 429", what, resp.StatusCode, loc)
			return false
		}
	}
	// exhaust loops on GET /oidc/login as the client xff names: the first burst attempts go on to
	// the provider, then, however long it keeps on, every one is refused.
	exhaust := func(what string, c *http.Client, xff func(i int) string) {
		t.Helper()
		for i := range burst + 20 {
			if started, want := startSignIn(what, c, xff(i)), i < burst; started != want {
				t.Fatalf("%s, attempt %d: started %t, want %t", what, i+1, started, want)
			}
		}
	}
	same := func(addr string) func(int) string { return func(int) string { return addr } }

	exhaust("the attacker behind the proxy", proxy, same("203.0.113.7"))
	// People behind the same proxy are untouched, each with their whole burst.
	for _, person := range []string{"203.0.113.8", "198.51.100.20, 203.0.113.9"} {
		for i := range burst {
			if !startSignIn("another person behind the proxy", proxy, person) {
				t.Fatalf("X-Forwarded-For %q, attempt %d: refused after the attacker's loop; the proxy's clients share one bucket", person, i+1)
			}
		}
	}
	// A left-most hop the client wrote itself does not buy it a new bucket: the proxy appended
	// the address it saw, the attacker's.
	if startSignIn("the attacker, prepending a forged hop", proxy, "192.0.2.99, 203.0.113.7") {
		t.Fatal("the attacker got a fresh bucket by writing its own X-Forwarded-For hop")
	}

	// IPv6 is counted by /64: hopping within one's own block buys nothing; the next /64 is
	// someone else.
	exhaust("an IPv6 attacker hopping within its /64", proxy, func(i int) string {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, byte(i + 1)}).String()
	})
	if !startSignIn("a neighbour in the next /64", proxy, "2001:db8:1:3::1") {
		t.Fatal("a client of another /64 was refused")
	}

	// A client that is not a trusted proxy cannot choose its bucket: each attempt forges a new
	// address, and it is still refused past its burst (its bucket is its own address's).
	forged := func(i int) string { return "198.51.100." + strconv.Itoa(i+1) }
	exhaust("a client forging X-Forwarded-For", stranger, forged)
	// Nor did its forgeries spend the buckets of the addresses it named.
	for i := range burst {
		if !startSignIn("a person the forger named", proxy, forged(0)) {
			t.Fatalf("attempt %d of %s through the proxy: refused; the forger spent its bucket", i+1, forged(0))
		}
	}
}

// clientAt is an HTTP client whose connections come from ip (any 127.0.0.0/8 address is this
// host's loopback) to the panel's 127.0.0.1 listener, whatever host the URL names, and which
// does not follow redirects (the test reads where they lead).
func clientAt(t *testing.T, ip string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return dialer.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
