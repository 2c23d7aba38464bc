//go:build !unit

package panel_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/switchboard-dev/switchboard/internal/panel"
)

// TestLocalAppCannotStealTheSession performs issue 18's item 5 the way it was reproduced: a
// person signs in to the panel that `kubectl switchboard panel` forwards to 127.0.0.1, then
// visits another local web app (another port of 127.0.0.1, and of localhost), which records the
// cookies the browser sends it and replays them against the panel. Cookies are not scoped by
// port, so before issue 18 the app received switchboard_session and its replay was signed in:
// it could create a key and be shown it.
//
// Now the browser is sent to a host of its own (sb-….localhost) before any cookie is set, so the
// app receives no session cookie; and a session cookie replayed under any other Host than the
// one it was created on is no session.
func TestLocalAppCannotStealTheSession(t *testing.T) {
	ns := env.Namespace(t, "theft")
	srv := startPanel(t, nil, panel.Deps{})
	var mu sync.Mutex
	var received []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Get("Cookie"))
		mu.Unlock()
		_, _ = fmt.Fprint(w, "<!doctype html><title>another local app</title><p>hello")
	}))
	t.Cleanup(other.Close)
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())

	ctx, problems := newBrowser(t)
	base := signInBrowser(ctx, t, srv.URL, grant(t, ns, "owner", ownerRules))
	if u, err := url.Parse(base); err != nil || !strings.HasPrefix(u.Hostname(), "sb-") || !strings.HasSuffix(u.Hostname(), ".localhost") {
		t.Fatalf("the browser signed in on %s, not on a host of the panel's own", base)
	}
	for _, u := range []string{other.URL + "/", "http://localhost:" + otherPort + "/"} {
		do(ctx, t, "visiting "+u, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("p")))
	}

	mu.Lock()
	stolen := append([]string(nil), received...)
	mu.Unlock()
	if len(stolen) < 2 {
		t.Fatalf("the other app saw %d requests, want the browser's 2 visits", len(stolen))
	}
	// What the app does with what it received: replay it to the panel, on the address it
	// knows and on the private one (as if it had learnt it).
	for _, cookies := range stolen {
		if strings.Contains(cookies, "switchboard_session") {
			t.Errorf("another local app received the panel's session cookie: %q", cookies)
		}
		for _, host := range []string{"", mustParse(t, base).Host} {
			if status := replay(t, srv.URL, host, cookies); status == http.StatusOK {
				t.Errorf("a replay of %q to %s was signed in", cookies, srv.URL)
			}
		}
	}

	// The session cookie itself, replayed under another Host, is no session; under its own it
	// is (so this test can tell).
	var session *network.Cookie
	do(ctx, t, "reading the cookies", chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		res, err := cdp.Call(ctx, target, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
		for _, c := range res.Cookies {
			if c.Name == "switchboard_session" {
				session = c
			}
		}
		return err
	}))
	if session == nil {
		t.Fatal("the browser holds no session cookie for the panel")
	}
	cookie := "switchboard_session=" + session.Value
	if status := replay(t, srv.URL, "", cookie); status == http.StatusOK {
		t.Error("the session cookie worked on 127.0.0.1, another host than the one it was created on")
	}
	if status := replay(t, srv.URL, "localhost:"+mustParse(t, srv.URL).Port(), cookie); status == http.StatusOK {
		t.Error("the session cookie worked on localhost, another host than the one it was created on")
	}
	if status := replay(t, srv.URL, mustParse(t, base).Host, cookie); status != http.StatusOK {
		t.Errorf("the session cookie on its own host got %d, want 200", status)
	}
	if p := problems.String(); p != "" {
		t.Fatalf("the browser reported problems:\n%s", p)
	}
}

// replay asks the panel at base for its keys page with cookies, as Host host ("" for base's
// own), without following redirects, and returns the status: 200 only when signed in.
func replay(t *testing.T, base, host, cookies string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/keys", nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Cookie", cookies)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// mustParse parses a URL the test made.
func mustParse(t *testing.T, u string) *url.URL {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBrowserOnSharedHostIsSentToItsOwn: a browser's page load on 127.0.0.1 or localhost is
// redirected to a new sb-….localhost name on the same port and path, and anything else a
// browser sends there is refused; clients that are not browsers (no Fetch Metadata) are served.
func TestBrowserOnSharedHostIsSentToItsOwn(t *testing.T) {
	srv := startPanel(t, nil, panel.Deps{})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// send returns the status and the Location of a request for /login?expired=1 as Host host.
	send := func(method, host string, browser bool) (int, string) {
		req, err := http.NewRequest(method, srv.URL+"/login?expired=1", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if browser {
			req.Header.Set("Sec-Fetch-Mode", "navigate")
			req.Header.Set("Sec-Fetch-Site", "none")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	port := mustParse(t, srv.URL).Port()
	seen := map[string]bool{}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port} {
		status, location := send(http.MethodGet, host, true)
		loc, err := url.Parse(location)
		if status != http.StatusTemporaryRedirect || err != nil || !strings.HasPrefix(loc.Hostname(), "sb-") ||
			!strings.HasSuffix(loc.Hostname(), ".localhost") || loc.Port() != port || loc.Path != "/login" || loc.RawQuery != "expired=1" {
			t.Fatalf("a browser on %s got %d to %q, want 307 to sb-….localhost:%s/login?expired=1", host, status, location, port)
		}
		if seen[loc.Host] {
			t.Fatalf("two redirects chose the same host %s", loc.Host)
		}
		seen[loc.Host] = true
		if status, _ := send(http.MethodPost, host, true); status != http.StatusForbidden {
			t.Fatalf("a browser's POST on %s got %d, want 403", host, status)
		}
		if status, _ := send(http.MethodGet, host, false); status != http.StatusOK {
			t.Fatalf("a client that is not a browser got %d on %s, want 200", status, host)
		}
	}
	if status, _ := send(http.MethodGet, "sb-abcdefghijklmnop.localhost:"+port, true); status != http.StatusOK {
		t.Fatalf("a browser on a private host got %d, want 200", status)
	}
}
