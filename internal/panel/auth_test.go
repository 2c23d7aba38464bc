//go:build !unit

package panel_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

const wantCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func requireSecurityHeaders(t *testing.T, p page) {
	t.Helper()
	want := map[string]string{
		"Content-Security-Policy": wantCSP,
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-store",
	}
	for k, v := range want {
		if got := p.header.Get(k); got != v {
			t.Errorf("%s %s: header %s = %q, want %q", p.url.Path, http.StatusText(p.status), k, got, v)
		}
	}
}

// findCookie returns the Set-Cookie of name in a raw response.
func findCookie(t *testing.T, resp *http.Response, name string) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s cookie set; Set-Cookie: %q", name, resp.Header.Values("Set-Cookie"))
	return nil
}

// rawSignIn signs in without following the redirect, to look at the response itself. Its
// body is closed already. prefix is what the panel's cookie names start with ("" or "__Host-").
func rawSignIn(t *testing.T, c *http.Client, base, token, prefix string) *http.Response { //nolint:bodyclose // closed inside
	t.Helper()
	copied := *c
	c = &copied
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	login := findCookie(t, resp, prefix+"switchboard_login")
	if !login.HttpOnly || login.SameSite != http.SameSiteStrictMode {
		t.Fatalf("sign-in CSRF cookie is not HttpOnly SameSite=Strict: %q", resp.Header.Values("Set-Cookie"))
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{"token": {token}, "csrf_token": {login.Value}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(login)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/keys" {
		t.Fatalf("sign-in answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return resp
}

func TestSessionCookieAttributes(t *testing.T) {
	ns := env.Namespace(t, "cookie")
	token := grant(t, ns, "owner", ownerRules)

	t.Run("plain HTTP", func(t *testing.T) {
		srv := startPanel(t, nil, panel.Deps{})
		resp := rawSignIn(t, srv.Client(), srv.URL, token, "") //nolint:bodyclose // closed by rawSignIn
		c := findCookie(t, resp, "switchboard_session")
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
			t.Fatalf("session cookie = %q, want HttpOnly; SameSite=Strict; Path=/ and not Secure over plain HTTP", resp.Header.Values("Set-Cookie"))
		}
		if strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), ";"), token) || strings.Contains(resp.Header.Get("Location"), token) {
			t.Fatal("the bearer token leaked into a cookie or a URL")
		}
		if len(c.Value) < 43 {
			t.Fatalf("session id %d characters long: too guessable", len(c.Value))
		}
	})
	// Secure cookies carry the __Host- prefix (a behaviour added on purpose: the names used to be
	// the same as over plain HTTP), so that no other host and no plain-HTTP page can set or
	// shadow them.
	t.Run("behind a TLS proxy", func(t *testing.T) {
		srv := startPanel(t, &configv1alpha1.PanelSettings{SecureCookies: true}, panel.Deps{})
		resp := rawSignIn(t, srv.Client(), srv.URL, token, "__Host-") //nolint:bodyclose // closed by rawSignIn
		c := findCookie(t, resp, "__Host-switchboard_session")
		if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Domain != "" {
			t.Fatalf("session cookie not Secure with SecureCookies: %+v", c)
		}
		for _, raw := range resp.Header.Values("Set-Cookie") {
			if !strings.HasPrefix(raw, "__Host-") || !strings.Contains(raw, "; Secure") || strings.Contains(strings.ToLower(raw), "domain=") {
				t.Fatalf("Set-Cookie %q is not a __Host- cookie", raw)
			}
		}
		// A plain session cookie, as a plain-HTTP page could set, is not taken for a session.
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/keys", nil)
		req.AddCookie(&http.Cookie{Name: "switchboard_session", Value: c.Value})
		plain, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = plain.Body.Close()
		if plain.Request.URL.Path != "/login" {
			t.Fatalf("a session cookie without the __Host- prefix was accepted: %d at %s", plain.StatusCode, plain.Request.URL)
		}
	})
	t.Run("TLS", func(t *testing.T) {
		h, err := panel.NewHandler(&configv1alpha1.PanelSettings{}, nil, panel.Deps{RESTConfig: env.Config})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewTLSServer(h)
		defer srv.Close()
		cookie := findCookie(t, rawSignIn(t, srv.Client(), srv.URL, token, "__Host-"), "__Host-switchboard_session") //nolint:bodyclose // closed by rawSignIn
		if !cookie.Secure {
			t.Fatalf("session cookie over TLS not Secure: %+v", cookie)
		}
		// A browser keeps and sends __Host- cookies over TLS: the whole sign-in works.
		v := newVisitor(t, srv)
		v.signIn(token, ns)
		if p := v.get("/keys?namespace=" + ns); p.status != http.StatusOK || p.url.Path != "/keys" {
			t.Fatalf("signed in over TLS, /keys answered %d at %s", p.status, p.url)
		}
	})
}

func TestSignIn(t *testing.T) {
	ns := env.Namespace(t, "signin")
	token := grant(t, ns, "owner", ownerRules)
	srv := startPanel(t, nil, panel.Deps{})

	t.Run("security headers", func(t *testing.T) {
		v := newVisitor(t, srv)
		p := v.get("/login")
		requireSecurityHeaders(t, p)
		if !strings.Contains(p.body, `type="password"`) {
			t.Fatal("the token field is not a password field")
		}
		if p := v.get("/keys"); p.url.Path != "/login" {
			t.Fatalf("/keys without a session went to %s, want the sign-in page", p.url.Path)
		}
	})
	t.Run("sign-in without its CSRF token is refused", func(t *testing.T) {
		v := newVisitor(t, srv)
		v.get("/login")
		if p := v.post("/login", url.Values{"token": {token}}); p.status != http.StatusForbidden {
			t.Fatalf("sign-in without CSRF token: %d, want 403", p.status)
		}
		if p := v.post("/login", url.Values{"token": {token}, "csrf_token": {"forged"}}); p.status != http.StatusForbidden {
			t.Fatalf("sign-in with a forged CSRF token: %d, want 403", p.status)
		}
	})
	t.Run("a wrong token is refused clearly", func(t *testing.T) {
		v := newVisitor(t, srv)
		v.get("/login")
		p := v.postCSRF("/login", url.Values{"token": {token[:len(token)-4] + "AAAA"}})
		if p.status != http.StatusUnauthorized || !strings.Contains(errorLine(p.body), "did not accept this token") {
			t.Fatalf("wrong token: %d %q", p.status, errorLine(p.body))
		}
		v.get("/login")
		if p := v.postCSRF("/login", url.Values{"token": {"  "}}); p.status != http.StatusBadRequest {
			t.Fatalf("empty token: %d, want 400", p.status)
		}
	})
	t.Run("sign-in opens the ServiceAccount's namespace, sign-out ends the session", func(t *testing.T) {
		v := newVisitor(t, srv)
		v.get("/login")
		p := v.postCSRF("/login", url.Values{"token": {"Bearer " + token}})
		if p.status != http.StatusOK || !strings.Contains(p.body, "system:serviceaccount:"+ns+":owner") ||
			!strings.Contains(p.body, `value="`+ns+`"`) {
			t.Fatalf("after sign-in: %d %s %q", p.status, p.url, errorLine(p.body))
		}
		requireSecurityHeaders(t, p)
		if p := v.post("/logout", url.Values{}); p.status != http.StatusForbidden {
			t.Fatalf("sign-out without CSRF token: %d, want 403", p.status)
		}
		if p := v.postCSRF("/logout", url.Values{}); p.url.Path != "/login" {
			t.Fatalf("sign-out went to %s", p.url)
		}
		if p := v.get("/keys?namespace=" + ns); p.url.Path != "/login" {
			t.Fatalf("after sign-out /keys went to %s, want the sign-in page", p.url.Path)
		}
	})
	t.Run("a token the API server stops accepting ends the session", func(t *testing.T) {
		t.Parallel() // the API server caches an accepted token for 10 seconds
		gone := grant(t, ns, "leaver", ownerRules)
		v := newVisitor(t, srv)
		v.signIn(gone, ns)
		if err := env.Client.Delete(testCtx(t), &corev1.ServiceAccount{ObjectMeta: metaName(ns, "leaver")}); err != nil {
			t.Fatal(err)
		}
		// The API server notices the deleted ServiceAccount through its informer, soon.
		waitFor(t, func() bool {
			r, err := kube.AuthenticationV1().TokenReviews().Create(testCtx(t),
				&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: gone}}, metav1.CreateOptions{})
			return err == nil && !r.Status.Authenticated
		})
		p := v.get("/keys?namespace=" + ns)
		if p.url.Path != "/login" || !strings.Contains(errorLine(p.body), "session ended") {
			t.Fatalf("with a dead token /keys showed %s: %q", p.url, errorLine(p.body))
		}
	})
}

func TestCSRFRequiredOnEveryChange(t *testing.T) {
	ns := env.Namespace(t, "csrf")
	token := grant(t, ns, "owner", ownerRules)
	srv := startPanel(t, nil, panel.Deps{})
	v := newVisitor(t, srv)
	v.signIn(token, ns)
	good := v.csrf
	forms := map[string]url.Values{
		"/keys/create": {"namespace": {ns}, "name": {"forged"}, "expires": {""}},
		"/keys/rotate": {"namespace": {ns}, "name": {"forged"}, "grace": {"0s"}, "requested_at": {time.Now().UTC().Format(time.RFC3339Nano)}},
		"/keys/revoke": {"namespace": {ns}, "name": {"forged"}, "confirm": {"yes"}},
		"/keys/reveal": {"namespace": {ns}, "name": {"forged"}},
		"/logout":      {},
	}
	for path, form := range forms {
		for _, token := range []string{"", "wrong", good + "x"} {
			f := url.Values{}
			for k, vs := range form {
				f[k] = vs
			}
			if token != "" {
				f.Set("csrf_token", token)
			}
			p := v.post(path, f)
			if p.status != http.StatusForbidden {
				t.Errorf("POST %s with CSRF token %q: %d, want 403", path, token, p.status)
			}
			if p.header.Get("Content-Security-Policy") != wantCSP {
				t.Errorf("POST %s: 403 without the CSP header", path)
			}
		}
	}
	var keys switchboardv1alpha1.APIKeyList
	if err := env.Client.List(testCtx(t), &keys, client.InNamespace(ns)); err != nil || len(keys.Items) != 0 {
		t.Fatalf("a forged POST changed something: %d APIKeys (%v)", len(keys.Items), err)
	}
	// The session is still good: the refusals did not sign the visitor out.
	if p := v.get("/keys?namespace=" + ns); p.status != http.StatusOK || p.url.Path != "/keys" {
		t.Fatalf("after refused forgeries /keys: %d %s", p.status, p.url)
	}
}
