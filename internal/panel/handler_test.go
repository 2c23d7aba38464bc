package panel_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
// body is closed already.
func rawSignIn(t *testing.T, c *http.Client, base, token string) *http.Response { //nolint:bodyclose // closed inside
	t.Helper()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	login := findCookie(t, resp, "switchboard_login")
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
		srv := startPanel(t, panel.Options{})
		resp := rawSignIn(t, srv.Client(), srv.URL, token) //nolint:bodyclose // closed by rawSignIn
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
	t.Run("behind a TLS proxy", func(t *testing.T) {
		srv := startPanel(t, panel.Options{SecureCookies: true})
		c := findCookie(t, rawSignIn(t, srv.Client(), srv.URL, token), "switchboard_session") //nolint:bodyclose // closed by rawSignIn
		if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
			t.Fatalf("session cookie not Secure with SecureCookies: %+v", c)
		}
	})
	t.Run("TLS", func(t *testing.T) {
		h, err := panel.NewHandler(env.Config, panel.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewTLSServer(h)
		defer srv.Close()
		c := srv.Client()
		cookie := findCookie(t, rawSignIn(t, c, srv.URL, token), "switchboard_session") //nolint:bodyclose // closed by rawSignIn
		if !cookie.Secure {
			t.Fatalf("session cookie over TLS not Secure: %+v", cookie)
		}
	})
}

func TestSignIn(t *testing.T) {
	ns := env.Namespace(t, "signin")
	token := grant(t, ns, "owner", ownerRules)
	srv := startPanel(t, panel.Options{})

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
	srv := startPanel(t, panel.Options{})
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

func TestCreateShowOnceRotateRevoke(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "keys")
	token := grant(t, ns, "owner", ownerRules)
	logs := &logBuffer{}
	srv := startPanel(t, panel.Options{Logger: logs.logger()})
	v := newVisitor(t, srv)
	v.signIn(token, ns)

	p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"ci"}, "description": {"CI pipeline"}, "expires": {"30d"}})
	key := revealedKey(p.body)
	if p.status != http.StatusOK || key == "" {
		t.Fatalf("create: %d, error %q, no key shown", p.status, errorLine(p.body))
	}
	requireSecurityHeaders(t, p)
	if !strings.Contains(p.body, "it will not be shown again") || !strings.Contains(p.body, `data-copy="new-key"`) {
		t.Fatal("the key is shown without the store-it-now notice or the copy button")
	}
	if !strings.Contains(p.body, `data-replace-url="/keys?namespace=`+ns+`"`) {
		t.Fatal("the page showing the key does not replace the POST in the browser's history")
	}
	requireHash(t, ns, "ci", key)
	requireV1(t, key, http.StatusOK)
	created, _ := hashSecret(t, ns, "ci")
	if created.Spec.Description != "CI pipeline" || created.Spec.ExpiresAt == nil ||
		time.Until(created.Spec.ExpiresAt.Time) < 29*24*time.Hour {
		t.Fatalf("APIKey spec = %+v, want the description and an expiry in 30 days", created.Spec)
	}
	var reveal corev1.Secret
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "ci-key-1"}, &reveal); !apierrors.IsNotFound(err) {
		t.Fatalf("the reveal Secret is still there after the key was shown: %v", err)
	}

	p = v.get("/keys?namespace=" + ns)
	if strings.Contains(p.body, key) || revealedKey(p.body) != "" {
		t.Fatal("the key is shown again on the next page")
	}
	if !strings.Contains(p.body, `data-key="ci"`) || !strings.Contains(p.body, created.Status.KeyHint) || !strings.Contains(p.body, "Active") {
		t.Fatalf("the table lacks the key's row, hint or state")
	}

	// Creating it twice fails clearly and reveals nothing.
	p = v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"ci"}, "expires": {""}})
	if p.status != http.StatusConflict || !strings.Contains(errorLine(p.body), "already exists") || revealedKey(p.body) != "" {
		t.Fatalf("second create: %d %q", p.status, errorLine(p.body))
	}

	// Rotate with a grace period: a new key, the old one still accepted until the grace ends.
	p = v.get("/keys/rotate?namespace=" + ns + "&name=ci")
	if p.status != http.StatusOK || !strings.Contains(p.body, `value="168h"`) {
		t.Fatalf("rotate form: %d %q", p.status, errorLine(p.body))
	}
	requestedAt := regexpValue(t, p.body, "requested_at")
	rotateForm := url.Values{"namespace": {ns}, "name": {"ci"}, "grace": {"1h"}, "requested_at": {requestedAt}}
	p = v.postCSRF("/keys/rotate", rotateForm)
	rotated := revealedKey(p.body)
	if p.status != http.StatusOK || rotated == "" || rotated == key {
		t.Fatalf("rotate: %d %q, new key shown: %v", p.status, errorLine(p.body), rotated != "")
	}
	if !strings.Contains(p.body, "previous key keeps working until") {
		t.Fatal("the rotation page does not say until when the previous key works")
	}
	requireHash(t, ns, "ci", rotated)
	requireV1(t, rotated, http.StatusOK)
	requireV1(t, key, http.StatusOK) // within the grace period
	_, secret := hashSecret(t, ns, "ci")
	if got := string(secret.Data[switchboardv1alpha1.HashSecretPreviousKey]); got != sha(key) {
		t.Fatalf("previous.sha256 = %s, want the hash of the first key", got)
	}
	// Posting the same rotate form again (a reload) rotates nothing.
	p = v.postCSRF("/keys/rotate", rotateForm)
	if p.status != http.StatusConflict || revealedKey(p.body) != "" || !strings.Contains(errorLine(p.body), "already carried out") {
		t.Fatalf("re-posted rotation: %d %q", p.status, errorLine(p.body))
	}
	requireHash(t, ns, "ci", rotated)

	// Revoke: a confirmation page, then the POST.
	p = v.get("/keys/revoke?namespace=" + ns + "&name=ci")
	if p.status != http.StatusOK || !strings.Contains(p.body, "cannot be undone") {
		t.Fatalf("revoke confirmation: %d %q", p.status, errorLine(p.body))
	}
	if p = v.postCSRF("/keys/revoke", url.Values{"namespace": {ns}, "name": {"ci"}}); p.status != http.StatusBadRequest {
		t.Fatalf("revoke without confirmation: %d, want 400", p.status)
	}
	p = v.postCSRF("/keys/revoke", url.Values{"namespace": {ns}, "name": {"ci"}, "confirm": {"yes"}})
	if p.status != http.StatusOK || p.url.Path != "/keys" || !noticePattern.MatchString(p.body) || !strings.Contains(p.body, "Revoked") {
		t.Fatalf("revoke: %d %s %q", p.status, p.url, errorLine(p.body))
	}
	var revoked switchboardv1alpha1.APIKey
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "ci"}, &revoked); err != nil || !revoked.Spec.Revoked {
		t.Fatalf("APIKey not revoked: %v %+v", err, revoked.Spec)
	}
	requireV1(t, rotated, http.StatusUnauthorized)
	requireV1(t, key, http.StatusUnauthorized)
	if p = v.get("/keys/rotate?namespace=" + ns + "&name=ci"); p.status != http.StatusOK {
		t.Fatalf("rotate form of a revoked key: %d", p.status)
	}
	p = v.postCSRF("/keys/rotate", url.Values{"namespace": {ns}, "name": {"ci"}, "grace": {"0s"}, "requested_at": {regexpValue(t, p.body, "requested_at")}})
	if p.status != http.StatusConflict || !strings.Contains(errorLine(p.body), "revoked") {
		t.Fatalf("rotating a revoked key: %d %q", p.status, errorLine(p.body))
	}

	out := logs.String()
	for name, secret := range map[string]string{"bearer token": token, "first key": key, "rotated key": rotated} {
		if strings.Contains(out, secret) {
			t.Errorf("the %s is in the panel's log", name)
		}
	}
	if !strings.Contains(out, "revealed APIKey") || !strings.Contains(out, created.Status.KeyHint) {
		t.Errorf("the log does not record the reveal with the hint:\n%s", out)
	}
}

func TestForbiddenIsOneClearLine(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "forbidden")
	srv := startPanel(t, panel.Options{})

	t.Run("no rights at all", func(t *testing.T) {
		v := newVisitor(t, srv)
		p := v.signIn(grant(t, ns, "nobody", nil), ns)
		body := html.UnescapeString(p.body)
		if !strings.Contains(body, `you may not list apikeys.switchboard.dev in namespace "`+ns+`"`) {
			t.Fatalf("keys page for a user without rights: %d %q", p.status, body)
		}
		if !strings.Contains(body, `you may not list connections.switchboard.dev`) {
			t.Fatal("the Connections section does not name the missing permission")
		}
		if strings.Contains(p.body, "<select id=\"namespace\"") {
			t.Fatal("a user who may not list namespaces got a namespace list")
		}
		p = v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"sneaky"}, "expires": {""}})
		if p.status != http.StatusForbidden || !strings.Contains(errorLine(p.body), `you may not create apikeys.switchboard.dev in namespace "`+ns+`"`) {
			t.Fatalf("create without rights: %d %q", p.status, errorLine(p.body))
		}
	})
	t.Run("may read but not create", func(t *testing.T) {
		v := newVisitor(t, srv)
		v.signIn(grant(t, ns, "reader", readOnlyRules), ns)
		p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"sneaky"}, "expires": {""}})
		if p.status != http.StatusForbidden || !strings.Contains(errorLine(p.body), `"create" on apikeys.switchboard.dev`) {
			t.Fatalf("create with read-only rights: %d %q", p.status, errorLine(p.body))
		}
		existing := &switchboardv1alpha1.APIKey{ObjectMeta: metaName(ns, "theirs")}
		if err := env.Client.Create(testCtx(t), existing); err != nil {
			t.Fatal(err)
		}
		p = v.get("/keys/rotate?namespace=" + ns + "&name=theirs")
		p = v.postCSRF("/keys/rotate", url.Values{"namespace": {ns}, "name": {"theirs"}, "grace": {"0s"}, "requested_at": {regexpValue(t, p.body, "requested_at")}})
		if p.status != http.StatusForbidden || !strings.Contains(errorLine(p.body), "you may not patch apikeys.switchboard.dev") {
			t.Fatalf("rotate with read-only rights: %d %q", p.status, errorLine(p.body))
		}
		p = v.get("/keys/revoke?namespace=" + ns + "&name=theirs")
		p = v.postCSRF("/keys/revoke", url.Values{"namespace": {ns}, "name": {"theirs"}, "confirm": {"yes"}})
		if p.status != http.StatusForbidden || !strings.Contains(errorLine(p.body), "you may not patch apikeys.switchboard.dev") {
			t.Fatalf("revoke with read-only rights: %d %q", p.status, errorLine(p.body))
		}
		p = v.get("/keys/revoke?namespace=" + ns + "&name=sneaky")
		if p.status != http.StatusNotFound || !strings.Contains(errorLine(p.body), `APIKey "sneaky" not found`) {
			t.Fatalf("revoke of a missing key: %d %q", p.status, errorLine(p.body))
		}
	})
	t.Run("may create keys but not read Secrets", func(t *testing.T) {
		v := newVisitor(t, srv)
		v.signIn(grant(t, ns, "creator", noSecretRules), ns)
		p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"hidden"}, "expires": {""}})
		line := errorLine(p.body)
		if p.status != http.StatusForbidden || revealedKey(p.body) != "" ||
			!strings.Contains(line, `you may not get secrets in namespace "`+ns+`"`) || !strings.Contains(line, "nothing was changed") {
			t.Fatalf("create without Secret rights: %d %q", p.status, line)
		}
		// Checked before anything changed: no APIKey is left whose key this person cannot see.
		var k switchboardv1alpha1.APIKey
		if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "hidden"}, &k); !apierrors.IsNotFound(err) {
			t.Fatalf("the APIKey was created although its key could not be shown: %v", err)
		}
	})
	t.Run("may list namespaces", func(t *testing.T) {
		v := newVisitor(t, srv)
		v.signIn(grant(t, ns, "viewer", nil), ns)
		// The namespace list is cluster-wide: grant it with a ClusterRole.
		bindClusterNamespaceReader(t, ns, "viewer")
		p := v.get("/keys?namespace=" + ns)
		if !strings.Contains(p.body, `<select id="namespace"`) || !strings.Contains(p.body, `<option value="`+systemNS+`"`) {
			t.Fatal("a user who may list namespaces gets no namespace list")
		}
	})
}

func TestOperatorTimeoutThenShowKey(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "timeout")
	token := grant(t, ns, "owner", ownerRules)
	// A panel that waits no time at all stands for an operator that is not running.
	impatient := startPanel(t, panel.Options{RevealTimeout: time.Nanosecond})
	v := newVisitor(t, impatient)
	v.signIn(token, ns)
	p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"slow"}, "expires": {""}})
	if p.status != http.StatusGatewayTimeout || !strings.Contains(errorLine(p.body), "operator may not be running") || revealedKey(p.body) != "" {
		t.Fatalf("create with an operator too slow: %d %q", p.status, errorLine(p.body))
	}
	// Once the operator has issued the key, the table offers to show it, once.
	waitFor(t, func() bool {
		var k switchboardv1alpha1.APIKey
		return env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "slow"}, &k) == nil && k.Status.RevealSecretName != ""
	})
	p = v.get("/keys?namespace=" + ns)
	if !strings.Contains(p.body, "Show key") {
		t.Fatal("a key waiting to be shown has no Show key button")
	}
	p = v.postCSRF("/keys/reveal", url.Values{"namespace": {ns}, "name": {"slow"}})
	key := revealedKey(p.body)
	if p.status != http.StatusOK || key == "" {
		t.Fatalf("show key: %d %q", p.status, errorLine(p.body))
	}
	requireHash(t, ns, "slow", key)
	p = v.postCSRF("/keys/reveal", url.Values{"namespace": {ns}, "name": {"slow"}})
	if revealedKey(p.body) != "" || p.status != http.StatusConflict {
		t.Fatalf("second show: %d %q", p.status, errorLine(p.body))
	}
}
