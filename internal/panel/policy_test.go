//go:build !unit

package panel_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

// TestCreateFormPolicy: the create form's rate limit, burst, allowed sources and audiences are refused
// with one clear line when wrong (nothing created, the form kept), stored when right, and
// shown in the table.
func TestCreateFormPolicy(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "policy")
	srv := startPanel(t, nil, panel.Deps{})
	v := newVisitor(t, srv)
	v.signIn(grant(t, ns, "owner", ownerRules), ns)

	for _, tc := range []struct {
		rate, burst, sources, audiences, want string
	}{
		{"100", "", "", "", `Rate limit: rate limit "100" is not REQUESTS/PERIOD, e.g. 100/1m.`},
		{"10/500ms", "", "", "", "the period must be whole seconds"},
		{"10/1m", "11", "", "", "the burst must be from 1 to the rate limit's requests (10), not 11"},
		{"10/1m", "two", "", "", "The burst is a whole number of requests, at least 1."},
		{"", "5", "", "", "a burst needs a rate limit"},
		{"", "", "10.0.0.1/8", "", "Allowed sources: source range \"10.0.0.1/8\" must be written as its network address: 10.0.0.0/8."},
		{"", "", "office", "", "is not a CIDR"},
		{"", "", "", "Billing", "Audiences: audience \"Billing\" must be written in lower case: billing."},
		{"", "", "", "connections, billing.v2", "Audiences: audience \"billing.v2\" is not a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit"},
		{"", "", "", "billing billing", "Audiences: audience \"billing\" is given twice."},
	} {
		p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"bad"}, "expires": {""},
			"rate_limit": {tc.rate}, "burst": {tc.burst}, "sources": {tc.sources}, "audiences": {tc.audiences}})
		if p.status != http.StatusBadRequest || !strings.Contains(errorLine(p.body), tc.want) {
			t.Errorf("rate %q burst %q sources %q audiences %q: %d %q, want 400 saying %q", tc.rate, tc.burst, tc.sources, tc.audiences, p.status, errorLine(p.body), tc.want)
		}
		for field, typed := range map[string]string{"name": "bad", "rate_limit": tc.rate, "burst": tc.burst, "sources": tc.sources, "audiences": tc.audiences} {
			if got := typedValue(p.body, field); got != typed {
				t.Errorf("the refused form shows %q in %s, not what was typed (%q)", got, field, typed)
			}
		}
	}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "bad"}, &switchboardv1alpha1.APIKey{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left an APIKey: %v", err)
	}

	p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"partner"}, "expires": {""},
		"rate_limit": {"100/1m"}, "burst": {"20"}, "sources": {"203.0.113.0/24, 2001:db8::/32"}, "audiences": {"billing connections"}})
	if p.status != http.StatusOK || revealedKey(p.body) == "" {
		t.Fatalf("create with a policy: %d %q", p.status, errorLine(p.body))
	}
	created, _ := hashSecret(t, ns, "partner")
	if keyclient.FormatRateLimit(created.Spec.RateLimit) != "100/1m,burst=20" || keyclient.FormatSourceRanges(created.Spec.AllowedSourceRanges) != "203.0.113.0/24,2001:db8::/32" ||
		keyclient.FormatAudiences(created.Spec.Audiences) != "billing,connections" {
		t.Fatalf("stored policy: %+v", created.Spec)
	}
	p = v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"open"}, "expires": {""}})
	if p.status != http.StatusOK {
		t.Fatalf("create without a policy: %d %q", p.status, errorLine(p.body))
	}
	if open, _ := hashSecret(t, ns, "open"); open.Spec.RateLimit != nil || open.Spec.AllowedSourceRanges != nil || open.Spec.Audiences != nil {
		t.Fatalf("a key created without a policy has one: %+v", open.Spec)
	}
	p = v.get("/keys?namespace=" + ns)
	if !strings.Contains(p.body, "<code>100/1m,burst=20</code>") || !strings.Contains(p.body, "from <code>203.0.113.0/24, 2001:db8::/32</code>") ||
		!strings.Contains(p.body, "for <code>billing, connections</code>") ||
		!strings.Contains(p.body, "No rate limit") || !strings.Contains(p.body, "Any address") || !strings.Contains(p.body, "Every audience") {
		t.Fatal("the table does not show the keys' limits")
	}
}

// TestBrowserCreateWithPolicy creates a rate-limited key for two audiences in Chromium (after a
// bad audience was refused, with everything else kept) and uses it against the real /v1
// server: its budget, then 429. A key for another audience only gets 403 AUDIENCE_NOT_ALLOWED.
func TestBrowserCreateWithPolicy(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "browser-policy")
	token := grant(t, ns, "owner", ownerRules)
	srv := startPanel(t, nil, panel.Deps{})
	ctx, problems := newBrowser(t)
	_ = signInBrowser(ctx, t, srv.URL, token)
	typed := map[string]string{"name": "metered", "description": "Invoice sync", "rate_limit": "2/1h", "burst": "2",
		"sources": "127.0.0.0/8, ::1/128", "audiences": "Billing, connections"}
	do(ctx, t, "creating a key with a bad audience",
		chromedp.SendKeys(chromedp.CSS(`#create input[name="name"]`), typed["name"]),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="description"]`), typed["description"]),
		chromedp.SetValue(chromedp.CSS(`#create select[name="expires"]`), "30d"),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="rate_limit"]`), typed["rate_limit"]),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="burst"]`), typed["burst"]),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="sources"]`), typed["sources"]),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="audiences"]`), typed["audiences"]),
		chromedp.Click(chromedp.CSS("#create-key")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	if msg := textOf(ctx, t, "#error"); msg != `Audiences: audience "Billing" must be written in lower case: billing.` {
		t.Errorf("the refusal says %q", msg)
	}
	for field, want := range typed {
		if got := get(ctx, t, "reading "+field, chromedp.Value(chromedp.CSS(`#create input[name="`+field+`"]`))); got != want {
			t.Errorf("after the refusal the form shows %q in %s, not what was typed (%q)", got, field, want)
		}
	}
	if got := get(ctx, t, "reading the expiry", chromedp.Value(chromedp.CSS(`#create select[name="expires"]`))); got != "30d" {
		t.Errorf("after the refusal the expiry is %q, not the one chosen (30d)", got)
	}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "metered"}, &switchboardv1alpha1.APIKey{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left an APIKey: %v", err)
	}

	do(ctx, t, "correcting the audiences",
		chromedp.Clear(chromedp.CSS(`#create input[name="audiences"]`)),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="audiences"]`), "billing, connections"),
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
	if audiences := textOf(ctx, t, `tr[data-key="metered"] td.policy .audiences`); audiences != "for billing, connections" {
		t.Errorf("the table shows the audiences %q", audiences)
	}
	stored, _ := hashSecret(t, ns, "metered")
	if keyclient.FormatAudiences(stored.Spec.Audiences) != "billing,connections" || stored.Spec.Description != typed["description"] {
		t.Errorf("stored: %+v", stored.Spec)
	}
	requireV1(t, key, http.StatusOK) // the first of its 2
	if status, _ := v1Status(t, key); status != http.StatusOK {
		t.Fatalf("the second request: %d", status)
	}
	if status, code := v1Status(t, key); status != http.StatusTooManyRequests || code != "API_KEY_RATE_LIMITED" {
		t.Fatalf("the third request: %d %s, want 429 API_KEY_RATE_LIMITED", status, code)
	}

	// /v1's audience is "connections": a key for billing only is refused there.
	do(ctx, t, "creating a key for billing only",
		chromedp.SendKeys(chromedp.CSS(`#create input[name="name"]`), "billing-only"),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="audiences"]`), "billing"),
		chromedp.Click(chromedp.CSS("#create-key")),
		chromedp.WaitVisible(chromedp.CSS(`#revealed`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="billing-only"]`)),
	)
	billingOnly := get(ctx, t, "reading the key", chromedp.Value(chromedp.CSS("#new-key")))
	if audiences := textOf(ctx, t, `tr[data-key="billing-only"] td.policy .audiences`); audiences != "for billing" {
		t.Errorf("the table shows the audiences %q", audiences)
	}
	requireV1(t, billingOnly, http.StatusForbidden)
	if status, code := v1Status(t, billingOnly); status != http.StatusForbidden || code != "AUDIENCE_NOT_ALLOWED" {
		t.Fatalf("a key for billing only on /v1: %d %s, want 403 AUDIENCE_NOT_ALLOWED", status, code)
	}
	// The browser logs the refused create's status code (once); anything else is a problem.
	for _, p := range strings.Split(problems.String(), "\n") {
		refusedCreate := strings.Contains(p, "status of 400") && strings.HasSuffix(p, "/keys/create")
		if p != "" && !refusedCreate {
			t.Fatalf("the browser reported a problem: %s", p)
		}
	}
	if n := strings.Count(problems.String(), "status of 400"); n != 1 {
		t.Fatalf("the browser logged %d refused requests, want the one create with a bad audience", n)
	}
}

// typedValue is the value a page's create form shows in its input called name.
func typedValue(body, name string) string {
	m := regexp.MustCompile(`<input name="` + regexp.QuoteMeta(name) + `"[^>]*\svalue="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		return "(no such input)"
	}
	return html.UnescapeString(m[1])
}
