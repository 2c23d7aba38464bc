//go:build !unit

package panel_test

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

func TestBrowserKeyLifecycle(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "browser")
	token := grant(t, ns, "owner", ownerRules)
	srv := startPanel(t, nil, panel.Deps{})
	ctx, problems := newBrowser(t)
	base := signInBrowser(ctx, t, srv.URL, token)
	if got := textOf(ctx, t, ".who .user"); got != "system:serviceaccount:"+ns+":owner" {
		t.Fatalf("header shows user %q", got)
	}
	grantClipboard(ctx, t, base)

	do(ctx, t, "creating a key",
		chromedp.SendKeys(chromedp.CSS(`#create input[name="name"]`), "ci"),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="description"]`), "Nightly builds"),
		chromedp.SetValue(chromedp.CSS(`#create select[name="expires"]`), "90d"),
		chromedp.Click(chromedp.CSS("#create-key")),
		chromedp.WaitVisible(chromedp.CSS("#new-key")),
	)
	key := get(ctx, t, "reading the key", chromedp.Value(chromedp.CSS("#new-key")))
	if notice := textOf(ctx, t, "#revealed .warn"); !strings.Contains(notice, "Store it now: it will not be shown again.") {
		t.Fatalf("the reveal says %q, not to store the key now", notice)
	}
	requireHash(t, ns, "ci", key)
	requireV1(t, key, http.StatusOK)
	if location := get(ctx, t, "reading the address", chromedp.Location()); location != base+"/keys?namespace="+ns {
		t.Fatalf("after the POST the address is %s: reloading would post the form again", location)
	}

	do(ctx, t, "copying the key",
		chromedp.Click(chromedp.CSS(`button[data-copy="new-key"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button.copied`)),
	)
	clipboard := get(ctx, t, "reading the clipboard", chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if label := textOf(ctx, t, `button[data-copy="new-key"]`); label != "Copied" || clipboard != key {
		t.Fatalf("copy button: label %q, the clipboard holds the key: %v", label, clipboard == key)
	}

	// Reloading shows the table, and the key is gone for good.
	do(ctx, t, "reloading",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="ci"]`)),
	)
	html := get(ctx, t, "reading the page", chromedp.OuterHTML(chromedp.CSS("html")))
	if strings.Contains(html, key) || strings.Contains(html, `id="new-key"`) || strings.Contains(html, `class="error"`) {
		t.Fatal("after a reload the key (or an error) is on the page")
	}
	if state := textOf(ctx, t, `tr[data-key="ci"] .badge`); state != "Active" {
		t.Fatalf("the new key's state is %q", state)
	}

	// Rotate with a grace period of one hour: the new key is shown once, both keys work.
	do(ctx, t, "rotating",
		chromedp.Click(chromedp.CSS(`tr[data-key="ci"] a[href*="/keys/rotate"]`)),
		chromedp.WaitVisible(chromedp.CSS("#rotate-key")),
		chromedp.Click(chromedp.CSS(`input[name="grace"][value="1h"]`)),
		chromedp.Click(chromedp.CSS("#rotate-key")),
		chromedp.WaitVisible(chromedp.CSS("#new-key")),
	)
	rotated := get(ctx, t, "reading the rotated key", chromedp.Value(chromedp.CSS("#new-key")))
	if rotated == key {
		t.Fatal("rotation showed the old key")
	}
	if txt := textOf(ctx, t, "#revealed"); !strings.Contains(txt, "previous key keeps working until") {
		t.Fatalf("the rotation page does not say how long the old key works: %q", txt)
	}
	requireHash(t, ns, "ci", rotated)
	requireV1(t, rotated, http.StatusOK)
	requireV1(t, key, http.StatusOK)

	// Revoke, through the confirmation page.
	do(ctx, t, "revoking",
		chromedp.Navigate(base+"/keys?namespace="+ns),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="ci"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-key="ci"] a[href*="/keys/revoke"]`)),
		chromedp.WaitVisible(chromedp.CSS("#revoke-key")),
		chromedp.Click(chromedp.CSS("#revoke-key")),
		chromedp.WaitVisible(chromedp.CSS("#notice")),
	)
	if state := textOf(ctx, t, `tr[data-key="ci"] .badge`); state != "Revoked" {
		t.Fatalf("after revoking, the state is %q", state)
	}
	requireV1(t, rotated, http.StatusUnauthorized)
	requireV1(t, key, http.StatusUnauthorized)
	if p := problems.String(); p != "" {
		t.Fatalf("the browser reported problems:\n%s", p)
	}
}

func TestBrowserWithoutRights(t *testing.T) {
	ns := env.Namespace(t, "browser-norights")
	srv := startPanel(t, nil, panel.Deps{})
	ctx, problems := newBrowser(t)
	_ = signInBrowser(ctx, t, srv.URL, grant(t, ns, "nobody", nil))
	if got := textOf(ctx, t, "#keys-error"); !strings.Contains(got, `you may not list apikeys.switchboard.dev in namespace "`+ns+`"`) {
		t.Fatalf("the keys section says %q", got)
	}
	do(ctx, t, "trying to create a key",
		chromedp.SendKeys(chromedp.CSS(`#create input[name="name"]`), "sneaky"),
		chromedp.Click(chromedp.CSS("#create-key")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	line := textOf(ctx, t, "#error")
	if !strings.Contains(line, `Forbidden: you may not create apikeys.switchboard.dev in namespace "`+ns+`"`) || strings.Contains(line, "\n") {
		t.Fatalf("the error line says %q", line)
	}
	do(ctx, t, "signing in with a wrong token",
		chromedp.Click(chromedp.CSS(".who button")),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), "not-a-token"),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	if got := textOf(ctx, t, "#error"); !strings.Contains(got, "did not accept this token") {
		t.Fatalf("a wrong token shows %q", got)
	}
	// The browser logs the refused requests' status codes; anything else is a problem.
	for _, p := range strings.Split(problems.String(), "\n") {
		if p != "" && !strings.Contains(p, "status of 40") {
			t.Fatalf("the browser reported a problem: %s", p)
		}
	}
}

// TestBrowserSecureCookies signs in over TLS, as behind a TLS-terminating proxy, in a real
// browser: it keeps the panel's __Host- cookies (Secure, HttpOnly, SameSite=Strict, Path=/,
// no Domain) and works with them, and no script of the page can read the session's id.
func TestBrowserSecureCookies(t *testing.T) {
	ns := env.Namespace(t, "browser-tls")
	token := grant(t, ns, "owner", ownerRules)
	h, err := panel.NewHandler(&configv1alpha1.PanelSettings{SecureCookies: true}, nil, panel.Deps{RESTConfig: env.Config})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	ctx, problems := newBrowser(t, chromedp.Flag("ignore-certificate-errors", true))
	base := signInBrowser(ctx, t, srv.URL, token)
	var got []*network.Cookie
	do(ctx, t, "reading the cookies", chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		res, err := cdp.Call(ctx, target, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
		got = res.Cookies
		return err
	}))
	var session *network.Cookie
	for _, c := range got {
		if c.Name == "__Host-switchboard_session" {
			session = c
		}
		if !strings.HasPrefix(c.Name, "__Host-") {
			t.Errorf("cookie %s has no __Host- prefix", c.Name)
		}
	}
	if session == nil || !session.Secure || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Path != "/" {
		t.Fatalf("the browser holds no Secure, HttpOnly, SameSite=Strict __Host-switchboard_session cookie: %+v", got)
	}
	if seen := get(ctx, t, "reading document.cookie", chromedp.Evaluate[string](`document.cookie`)); strings.Contains(seen, session.Value) {
		t.Fatal("a script can read the session id")
	}
	do(ctx, t, "reloading, signed in",
		chromedp.Navigate(base+"/keys?namespace="+ns),
		chromedp.WaitVisible(chromedp.CSS("#api-keys")),
	)
	if p := problems.String(); p != "" {
		t.Fatalf("the browser reported problems:\n%s", p)
	}
}

// TestBrowserScreenshot renders a realistic "API keys" section and saves it as
// docs/panel-api-keys.png, the picture of the panel in the README and docs/keys.md, when SWITCHBOARD_UPDATE_SCREENSHOT
// is set (elsewhere it is written to a temporary directory).
func TestBrowserScreenshot(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "payments")
	ctx := testCtx(t)
	for _, c := range []switchboardv1alpha1.Connection{
		{ObjectMeta: metaName(ns, "warehouse"), Spec: switchboardv1alpha1.ConnectionSpec{ID: "conn_warehouse01", DisplayName: "Analytics warehouse", Provider: "postgres"}},
		{ObjectMeta: metaName(ns, "crm"), Spec: switchboardv1alpha1.ConnectionSpec{ID: "conn_crm7k2", DisplayName: "Sales CRM", Provider: "salesforce"}},
		{ObjectMeta: metaName(ns, "billing"), Spec: switchboardv1alpha1.ConnectionSpec{ID: "conn_billing3", DisplayName: "Billing", Provider: "stripe"}},
	} {
		if err := env.Client.Create(ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	// Keys in the states a team's namespace has after a while: used, rotated with grace, revoked.
	in := func(d time.Duration) *metav1.Time { at := metav1.NewTime(time.Now().Add(d)); return &at }
	keys := []switchboardv1alpha1.APIKey{
		{ObjectMeta: metaName(ns, "ci-pipeline"), Spec: switchboardv1alpha1.APIKeySpec{Description: "GitHub Actions deploys", ExpiresAt: in(90 * 24 * time.Hour)}},
		{ObjectMeta: metaName(ns, "acme-partner"), Spec: switchboardv1alpha1.APIKeySpec{Description: "ACME Corp integration",
			RateLimit:           &switchboardv1alpha1.APIKeyRateLimit{Requests: 600, Period: metav1.Duration{Duration: time.Minute}},
			AllowedSourceRanges: []switchboardv1alpha1.CIDR{"203.0.113.0/24"}, Audiences: []switchboardv1alpha1.Audience{"connections", "billing"}}},
		{ObjectMeta: metaName(ns, "legacy-cron"), Spec: switchboardv1alpha1.APIKeySpec{Description: "Old nightly export"}},
	}
	plain := map[string]string{}
	for i := range keys {
		if err := env.Client.Create(ctx, &keys[i]); err != nil {
			t.Fatal(err)
		}
		plain[keys[i].Name] = claimAsAdmin(t, &keys[i])
	}
	requireV1(t, plain["ci-pipeline"], http.StatusOK)
	waitFor(t, func() bool {
		var k switchboardv1alpha1.APIKey
		return env.Client.Get(ctx, client.ObjectKeyFromObject(&keys[0]), &k) == nil && k.Status.LastUsedAt != nil
	})
	rotation := &switchboardv1alpha1.APIKeyRotation{RequestedAt: time.Now().UTC().Format(time.RFC3339), GracePeriod: metav1.Duration{Duration: 24 * time.Hour}}
	patchSpec(t, &keys[1], func(s *switchboardv1alpha1.APIKeySpec) { s.Rotation = rotation })
	waitFor(t, func() bool {
		var k switchboardv1alpha1.APIKey
		return env.Client.Get(ctx, client.ObjectKeyFromObject(&keys[1]), &k) == nil && k.Status.LastHandledRotationAt == rotation.RequestedAt
	})
	claimAsAdmin(t, &keys[1])
	patchSpec(t, &keys[2], func(s *switchboardv1alpha1.APIKeySpec) { s.Revoked = true })

	token := grant(t, ns, "alice", ownerRules)
	srv := startPanel(t, nil, panel.Deps{})
	b, _ := newBrowser(t)
	_ = signInBrowser(b, t, srv.URL, token)
	do(b, t, "creating a key",
		chromedp.SendKeys(chromedp.CSS(`#create input[name="name"]`), "billing-sync"),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="description"]`), "Invoice sync worker"),
		chromedp.SetValue(chromedp.CSS(`#create select[name="expires"]`), "365d"),
		chromedp.Click(chromedp.CSS("#create-key")),
		chromedp.WaitVisible(chromedp.CSS("#new-key")),
		chromedp.EmulateViewport(1240, 810),
		chromedp.Sleep(200*time.Millisecond),
	)
	shot := get(b, t, "taking the screenshot", chromedp.CaptureScreenshot())
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if size := img.Bounds().Size(); size.X != 1240 || size.Y != 810 {
		t.Fatalf("the screenshot is %v, want 1240x810", size)
	}
	// The committed picture changes only when asked, so that a test run leaves the tree clean.
	out := filepath.Join(t.TempDir(), "panel-api-keys.png")
	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOT") != "" {
		out = filepath.Join(testenv.RepoRoot(), "docs", "panel-api-keys.png")
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil { //nolint:gosec // a picture for the docs
		t.Fatal(err)
	}
	t.Logf("screenshot written to %s", out)
}

// claimAsAdmin waits for the operator to publish key's reveal Secret and claims it, as its
// owner would with kubectl.
func claimAsAdmin(t *testing.T, key *switchboardv1alpha1.APIKey) string {
	t.Helper()
	var revealed keyclient.Revealed
	waitFor(t, func() bool {
		var k switchboardv1alpha1.APIKey
		if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(key), &k); err != nil || k.Status.RevealSecretName == "" {
			return false
		}
		r, err := keyclient.Claim(testCtx(t), env.Client, &k)
		revealed = r
		return err == nil
	})
	return revealed.Key
}

// patchSpec changes an APIKey's spec as an administrator.
func patchSpec(t *testing.T, key *switchboardv1alpha1.APIKey, change func(*switchboardv1alpha1.APIKeySpec)) {
	t.Helper()
	var k switchboardv1alpha1.APIKey
	if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(key), &k); err != nil {
		t.Fatal(err)
	}
	before := k.DeepCopy()
	change(&k.Spec)
	if err := env.Client.Patch(testCtx(t), &k, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}
