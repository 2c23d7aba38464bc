//go:build !unit

package panel_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

// TestCreateFormPolicy: the create form's rate limit, burst and allowed sources are refused
// with one clear line when wrong (nothing created, the form kept), stored when right, and
// shown in the table.
func TestCreateFormPolicy(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "policy")
	srv := startPanel(t, panel.Options{})
	v := newVisitor(t, srv)
	v.signIn(grant(t, ns, "owner", ownerRules), ns)

	for _, tc := range []struct {
		rate, burst, sources, want string
	}{
		{"100", "", "", `Rate limit: rate limit "100" is not REQUESTS/PERIOD, e.g. 100/1m.`},
		{"10/500ms", "", "", "the period must be whole seconds"},
		{"10/1m", "11", "", "the burst must be from 1 to the rate limit's requests (10), not 11"},
		{"10/1m", "two", "", "The burst is a whole number of requests, at least 1."},
		{"", "5", "", "a burst needs a rate limit"},
		{"", "", "10.0.0.1/8", "Allowed sources: source range \"10.0.0.1/8\" must be written as its network address: 10.0.0.0/8."},
		{"", "", "office", "is not a CIDR"},
	} {
		p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"bad"}, "expires": {""},
			"rate_limit": {tc.rate}, "burst": {tc.burst}, "sources": {tc.sources}})
		if p.status != http.StatusBadRequest || !strings.Contains(errorLine(p.body), tc.want) {
			t.Errorf("rate %q burst %q sources %q: %d %q, want 400 saying %q", tc.rate, tc.burst, tc.sources, p.status, errorLine(p.body), tc.want)
		}
		if tc.sources != "" && !strings.Contains(p.body, `value="`+tc.sources+`"`) {
			t.Errorf("the refused form lost what was typed (%q)", tc.sources)
		}
	}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "bad"}, &switchboardv1alpha1.APIKey{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left an APIKey: %v", err)
	}

	p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"partner"}, "expires": {""},
		"rate_limit": {"100/1m"}, "burst": {"20"}, "sources": {"203.0.113.0/24, 2001:db8::/32"}})
	if p.status != http.StatusOK || revealedKey(p.body) == "" {
		t.Fatalf("create with a policy: %d %q", p.status, errorLine(p.body))
	}
	created, _ := hashSecret(t, ns, "partner")
	if keyclient.FormatRateLimit(created.Spec.RateLimit) != "100/1m,burst=20" || keyclient.FormatSourceRanges(created.Spec.AllowedSourceRanges) != "203.0.113.0/24,2001:db8::/32" {
		t.Fatalf("stored policy: %+v", created.Spec)
	}
	p = v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"open"}, "expires": {""}})
	if p.status != http.StatusOK {
		t.Fatalf("create without a policy: %d %q", p.status, errorLine(p.body))
	}
	if open, _ := hashSecret(t, ns, "open"); open.Spec.RateLimit != nil || open.Spec.AllowedSourceRanges != nil {
		t.Fatalf("a key created without a policy has one: %+v", open.Spec)
	}
	p = v.get("/keys?namespace=" + ns)
	if !strings.Contains(p.body, "<code>100/1m,burst=20</code>") || !strings.Contains(p.body, "from <code>203.0.113.0/24, 2001:db8::/32</code>") ||
		!strings.Contains(p.body, "No rate limit") || !strings.Contains(p.body, "Any address") {
		t.Fatal("the table does not show the keys' limits")
	}
}

// TestBrowserCreateWithPolicy creates a rate-limited key in Chromium and uses it against the
// real /v1 server: its budget, then 429.
func TestBrowserCreateWithPolicy(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "browser-policy")
	token := grant(t, ns, "owner", ownerRules)
	srv := startPanel(t, panel.Options{})
	ctx, problems := newBrowser(t)
	_ = signInBrowser(ctx, t, srv.URL, token)
	do(ctx, t, "creating a limited key",
		chromedp.SendKeys(chromedp.CSS(`#create input[name="name"]`), "metered"),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="rate_limit"]`), "2/1h"),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="sources"]`), "127.0.0.0/8, ::1/128"),
		chromedp.Click(chromedp.CSS("#create-key")),
		chromedp.WaitVisible(chromedp.CSS("#new-key")),
	)
	key := get(ctx, t, "reading the key", chromedp.Value(chromedp.CSS("#new-key")))
	if rate := textOf(ctx, t, `tr[data-key="metered"] td.policy .rate`); rate != "2/1h" {
		t.Errorf("the table shows the rate limit %q", rate)
	}
	if sources := textOf(ctx, t, `tr[data-key="metered"] td.policy .sources`); sources != "from 127.0.0.0/8, ::1/128" {
		t.Errorf("the table shows the sources %q", sources)
	}
	requireV1(t, key, http.StatusOK) // the first of its 2
	if status, _ := v1Status(t, key); status != http.StatusOK {
		t.Fatalf("the second request: %d", status)
	}
	if status, code := v1Status(t, key); status != http.StatusTooManyRequests || code != "API_KEY_RATE_LIMITED" {
		t.Fatalf("the third request: %d %s, want 429 API_KEY_RATE_LIMITED", status, code)
	}
	if p := problems.String(); p != "" {
		t.Fatalf("the browser reported problems:\n%s", p)
	}
}
