//go:build !unit

package panel_test

import (
	"bytes"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"testing"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

// startPanel serves a panel of the settings s (nil: the defaults) for one test over plain HTTP,
// with deps (env's client filled in).
func startPanel(t *testing.T, s *configv1alpha1.PanelSettings, deps panel.Deps) *httptest.Server {
	t.Helper()
	if s == nil {
		s = &configv1alpha1.PanelSettings{}
	}
	deps.RESTConfig = env.Config
	h, err := panel.NewHandler(s, nil, deps)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// visitor is a cookie-keeping HTTP client: a browser without JavaScript.
type visitor struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newVisitor(t *testing.T, srv *httptest.Server) *visitor {
	// A copy: srv.Client() is one client for the whole server, and each visitor keeps its own jar.
	c := *srv.Client()
	return newVisitorAt(t, srv.URL, &c)
}

// newVisitorAt is a visitor of the panel at base, through c.
func newVisitorAt(t *testing.T, base string, c *http.Client) *visitor {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Jar = jar
	return &visitor{t: t, base: base, c: c}
}

var csrfPattern = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// page is a response as the tests look at it.
type page struct {
	status int
	header http.Header
	body   string
	url    *url.URL
}

func (v *visitor) do(req *http.Request) page {
	v.t.Helper()
	resp, err := v.c.Do(req)
	if err != nil {
		v.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		v.t.Fatal(err)
	}
	if m := csrfPattern.FindSubmatch(body); m != nil {
		v.csrf = string(m[1])
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(body), url: resp.Request.URL}
}

func (v *visitor) get(path string) page {
	v.t.Helper()
	req, err := http.NewRequest(http.MethodGet, v.base+path, nil)
	if err != nil {
		v.t.Fatal(err)
	}
	return v.do(req)
}

// post sends a form as it is; the caller adds csrf_token when it means to.
func (v *visitor) post(path string, form url.Values) page {
	v.t.Helper()
	req, err := http.NewRequest(http.MethodPost, v.base+path, bytes.NewBufferString(form.Encode()))
	if err != nil {
		v.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return v.do(req)
}

// postCSRF sends a form with the CSRF token of the last page.
func (v *visitor) postCSRF(path string, form url.Values) page {
	v.t.Helper()
	form.Set("csrf_token", v.csrf)
	return v.post(path, form)
}

// signIn signs in with token and lands on the keys page of ns.
func (v *visitor) signIn(token, ns string) page {
	v.t.Helper()
	v.get("/login")
	p := v.postCSRF("/login", url.Values{"token": {token}})
	if p.status != http.StatusOK || p.url.Path != "/keys" {
		v.t.Fatalf("sign-in landed on %s with %d: %s", p.url, p.status, errorLine(p.body))
	}
	return v.get("/keys?namespace=" + ns)
}

var (
	newKeyPattern = regexp.MustCompile(`id="new-key"[^>]*\svalue="([^"]*)"`)
	errorPattern  = regexp.MustCompile(`(?s)class="error"[^>]*>(.*?)</p>`)
	noticePattern = regexp.MustCompile(`(?s)class="notice"[^>]*>(.*?)</p>`)
)

// revealedKey is the key a page shows once, or "".
func revealedKey(body string) string {
	if m := newKeyPattern.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// errorLine is the page's error line, or "".
func errorLine(body string) string {
	if m := errorPattern.FindStringSubmatch(body); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}
