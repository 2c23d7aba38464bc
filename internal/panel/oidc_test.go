//go:build !unit

package panel_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ptr "k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// provider is the tests' OpenID Provider (bin/oidc-op: zitadel/oidc's op package, with a login
// page), started by TestMain; the kube-apiserver trusts it.
var provider *testenv.OIDCProvider

// The provider's people. Their ids are the "sub" claim, so the API server and the panel both
// call them oidc:<id>; their groups arrive as oidc:<group>.
var (
	alice = testenv.OIDCUser{ID: "alice", Username: "alice", Password: "alice-correct-horse", Email: "alice@example.com", Groups: []string{"key-owners"}}
	vic   = testenv.OIDCUser{ID: "vic", Username: "vic", Password: "vic-battery-staple", Groups: []string{"viewers"}}
	nora  = testenv.OIDCUser{ID: "nora", Username: "nora", Password: "nora-no-rights"}
)

const oidcClientID = "switchboard-panel"

// The panel's callback and sign-out return, on any *.localhost host and port: each test's
// panel listens on its own port.
var oidcRedirects = testenv.OIDCProviderOptions{
	RedirectURIs:           []string{"http://*.localhost:*/oidc/callback"},
	PostLogoutRedirectURIs: []string{`http://*.localhost:*/login\?signed_out=1`},
}

// mapping is the claim mapping of the panel and of the API server alike.
func mapping(o *configv1alpha1.OIDC) *configv1alpha1.OIDC {
	o.UsernameClaim, o.UsernamePrefix, o.GroupsClaim, o.GroupsPrefix = ptr.To("sub"), ptr.To("oidc:"), ptr.To("groups"), ptr.To("oidc:")
	return o
}

// clientSecretFile is a file of the test's holding p's client secret, as a mounted Secret would.
func clientSecretFile(t *testing.T, p *testenv.OIDCProvider) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(path, []byte(p.ClientSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startOIDCProvider starts the provider and writes the AuthenticationConfiguration that the
// panel prints for token mode, for kube-apiserver's --authentication-config.
func startOIDCProvider() (string, func(), error) {
	opts := oidcRedirects
	opts.Users, opts.ClientID = []testenv.OIDCUser{alice, vic, nora}, oidcClientID
	p, err := testenv.StartOIDCProvider(opts)
	if err != nil {
		return "", nil, err
	}
	o := mapping(&configv1alpha1.OIDC{IssuerURL: p.IssuerURL, ClientID: p.ClientID})
	path, err := p.WriteAuthenticationConfig(panel.AuthenticationConfigYAML(o, p.CAPEM))
	if err != nil {
		_ = p.Stop()
		return "", nil, err
	}
	provider = p
	return path, func() { _ = p.Stop() }, nil
}

// oidcPanel serves a panel of the settings s (nil: the defaults) with single sign-on through p
// in mode, behind the trusted proxies given, acting with cfg (the panel's own identity) and
// deps, on a host of its own under .localhost; it returns the panel's base URL.
func oidcPanel(t *testing.T, p *testenv.OIDCProvider, mode string, cfg *rest.Config, s *configv1alpha1.PanelSettings, proxies []string, deps panel.Deps) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	base := "http://sso-" + mode + ".localhost:" + port
	o := mapping(&configv1alpha1.OIDC{
		IssuerURL: p.IssuerURL, ClientID: p.ClientID, ClientSecretFile: clientSecretFile(t, p), CAFile: p.CAFile,
		RedirectURL: base + "/oidc/callback", Mode: mode, ProviderName: "Example SSO",
	})
	if mode == configv1alpha1.OIDCModeImpersonate {
		o.RevealURL, o.RevealCAConfigMap = sys.RevealURL, sys.RevealBundle
	}
	if s == nil {
		s = &configv1alpha1.PanelSettings{}
	}
	s.OIDC, deps.RESTConfig = o, cfg
	h, err := panel.NewHandler(s, proxies, deps)
	if err != nil {
		_ = l.Close()
		t.Fatalf("NewHandler: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return base
}

// impersonator is a ServiceAccount bound to exactly the chart's grants in impersonate mode:
// the impersonation (panel.ImpersonationRules) and the operator's reveal endpoint.
func impersonator(t *testing.T) *rest.Config {
	t.Helper()
	ns := env.Namespace(t, "panel-sa")
	cfg := env.ServiceAccount(t, ns, "panel")
	var rules []rbacv1.PolicyRule
	for _, r := range panel.ImpersonationRules {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{r.Group}, Resources: r.Resources, Verbs: r.Verbs})
	}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "panel"}
	bindCluster(t, "impersonator-"+ns, rules, subject)
	bindReveal(t, "reveal-caller-"+ns, subject)
	return cfg
}

// bindReveal grants subject what the chart grants the panel for the operator's reveal
// endpoint: post /reveal, and get the ConfigMap of its certificates.
func bindReveal(t *testing.T, name string, subject rbacv1.Subject) {
	t.Helper()
	_, bundle, _ := strings.Cut(sys.RevealBundle, "/")
	bindCluster(t, name, []rbacv1.PolicyRule{
		{NonResourceURLs: []string{reveal.Path}, Verbs: []string{"post"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{bundle}, Verbs: []string{"get"}},
	}, subject)
}

// bindCluster creates a ClusterRole with rules bound cluster-wide to subject.
func bindCluster(t *testing.T, name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	t.Helper()
	for _, obj := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{subject},
		},
	} {
		if err := env.Client.Create(testCtx(t), obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, name, err)
		}
	}
	waitForGrant(t, rules, subject)
}

// waitForGrant waits until the API server's authorizer allows subject each rule's first verb
// on its first resource (or URL): RBAC reaches the authorizer through its informers, a moment
// after the binding is created, and a test asserting what the grant allows must not race it.
func waitForGrant(t *testing.T, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	t.Helper()
	var user string
	var groups []string
	switch subject.Kind {
	case rbacv1.ServiceAccountKind:
		user = "system:serviceaccount:" + subject.Namespace + ":" + subject.Name
		groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + subject.Namespace, "system:authenticated"}
	case rbacv1.UserKind:
		user = subject.Name
	default:
		groups = []string{subject.Name}
	}
	for _, r := range rules {
		spec := authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups}
		if len(r.NonResourceURLs) > 0 {
			spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.NonResourceURLs[0], Verb: r.Verbs[0]}
		} else {
			spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Group: r.APIGroups[0], Resource: r.Resources[0], Verb: r.Verbs[0]}
			if len(r.ResourceNames) > 0 {
				spec.ResourceAttributes.Name = r.ResourceNames[0]
			}
		}
		testenv.Eventually(t, 30*time.Second, "the grant reaching the authorizer", func() error {
			review := &authorizationv1.SubjectAccessReview{Spec: spec}
			if err := env.Client.Create(testCtx(t), review); err != nil {
				return err
			}
			if !review.Status.Allowed {
				return fmt.Errorf("%s %v may not yet %+v", user, groups, r)
			}
			return nil
		})
	}
}

// bindGroup grants rules in ns to an OIDC group (oidc:<group>).
func bindGroup(t *testing.T, ns, group string, rules []rbacv1.PolicyRule) {
	t.Helper()
	name := "oidc-" + group
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "oidc:" + group}},
		},
	} {
		if err := env.Client.Create(testCtx(t), obj); err != nil {
			t.Fatalf("creating %T %s/%s: %v", obj, ns, name, err)
		}
	}
}

// ssoBrowser is a browser that trusts the provider's TLS certificate (and no other untrusted one).
func ssoBrowser(t *testing.T) (context.Context, *pageProblems) {
	t.Helper()
	return newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", provider.SPKIHash))
}

// waitVisible waits for sel, and on failure says where the browser is and what it shows.
func waitVisible(ctx context.Context, t *testing.T, what, sel string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		loc := get(ctx, t, "reading the address", chromedp.Location())
		body := get(ctx, t, "reading the page", chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("browser: waiting for %s (%s): %v; at %s, showing %q", what, sel, err, loc, body)
	}
}

// signInSSO clicks "Sign in with Example SSO" on the panel at base, logs in on the provider's
// own login page, and waits for the API keys section.
func signInSSO(ctx context.Context, t *testing.T, base string, u testenv.OIDCUser) {
	t.Helper()
	do(ctx, t, "signing in with single sign-on as "+u.Username,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#sso-sign-in")),
		chromedp.Click(chromedp.CSS("#sso-sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#username")),
	)
	if loc := get(ctx, t, "reading the address", chromedp.Location()); !strings.HasPrefix(loc, provider.IssuerURL+"/") {
		t.Fatalf("the sign-in button led to %s, not to the provider's login page", loc)
	}
	do(ctx, t, "logging in on the provider's page",
		chromedp.SendKeys(chromedp.CSS("#username"), u.Username),
		chromedp.SendKeys(chromedp.CSS("#password"), u.Password),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#api-keys")),
	)
}

// TestOIDCBrowser signs in with the provider in Chromium, in both modes: the keys page as the
// person, a key created and shown once, then sign-out at the panel and at the provider.
func TestOIDCBrowser(t *testing.T) {
	requireOperator(t)
	for _, mode := range []string{configv1alpha1.OIDCModeToken, configv1alpha1.OIDCModeImpersonate} {
		t.Run(mode, func(t *testing.T) {
			ns := env.Namespace(t, "sso-"+mode)
			bindGroup(t, ns, "key-owners", ownerRules)
			cfg := env.Config
			if mode == configv1alpha1.OIDCModeImpersonate {
				cfg = impersonator(t)
			}
			var logs logBuffer
			base := oidcPanel(t, provider, mode, cfg, nil, nil, panel.Deps{Logger: logs.logger()})
			ctx, problems := ssoBrowser(t)
			signInSSO(ctx, t, base, alice)
			if got := textOf(ctx, t, ".who .user"); got != "oidc:alice" {
				t.Fatalf("header shows user %q, want oidc:alice", got)
			}
			do(ctx, t, "creating a key",
				chromedp.Navigate(base+"/keys?namespace="+ns),
				chromedp.WaitVisible(chromedp.CSS("#create")),
				chromedp.SendKeys(chromedp.CSS(`#create input[name="name"]`), "sso"),
				chromedp.Click(chromedp.CSS("#create-key")),
				chromedp.WaitVisible(chromedp.CSS("#new-key")),
			)
			key := get(ctx, t, "reading the key", chromedp.Value(chromedp.CSS("#new-key")))
			requireHash(t, ns, "sso", key)
			requireV1(t, key, http.StatusOK)
			var created switchboardv1alpha1.APIKey
			if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "sso"}, &created); err != nil {
				t.Fatal(err)
			}
			do(ctx, t, "reloading",
				chromedp.Reload(),
				chromedp.WaitVisible(chromedp.CSS(`tr[data-key="sso"]`)),
			)
			if html := get(ctx, t, "reading the page", chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(html, key) {
				t.Fatal("the key is still on the page after a reload")
			}
			ended, revoked := strings.Count(provider.Log(), "path=/end_session"), strings.Count(provider.Log(), "path=/revoke")
			do(ctx, t, "signing out", chromedp.Click(chromedp.CSS(".who button")))
			waitVisible(ctx, t, "the panel's signed-out page", "#notice")
			// The way back to the panel led through the provider's end-session page, and the
			// panel revoked the refresh token there first.
			if strings.Count(provider.Log(), "path=/end_session") <= ended || strings.Count(provider.Log(), "path=/revoke") <= revoked {
				t.Fatalf("signing out did not end the session at the provider (end_session and revoke requests):\n%s", provider.Log())
			}
			if got := textOf(ctx, t, "#notice"); !strings.Contains(got, "signed out") {
				t.Fatalf("after signing out the page says %q", got)
			}
			do(ctx, t, "opening the keys again",
				chromedp.Navigate(base+"/keys?namespace="+ns),
				chromedp.WaitVisible(chromedp.CSS("#sso-sign-in")),
			)
			logged := logs.String()
			for _, secret := range []string{provider.ClientSecret, key} {
				if strings.Contains(logged, secret) {
					t.Fatal("a secret reached the panel's log")
				}
			}
			if !strings.Contains(logged, `"signed in"`) || !strings.Contains(logged, `"user":"oidc:alice"`) {
				t.Fatalf("the log has no sign-in of oidc:alice:\n%s", logged)
			}
			if p := problems.String(); p != "" {
				t.Fatalf("the browser reported problems:\n%s", p)
			}
		})
	}
}

// TestOIDCLeastPrivilege: in both modes, a viewer sees keys but cannot create one, a person
// without rights in a namespace sees nothing of it, and an impersonation header the browser
// sends changes nothing.
func TestOIDCLeastPrivilege(t *testing.T) {
	for _, mode := range []string{configv1alpha1.OIDCModeToken, configv1alpha1.OIDCModeImpersonate} {
		t.Run(mode, func(t *testing.T) {
			ns := env.Namespace(t, "sso-view-"+mode)
			bindGroup(t, ns, "viewers", []rbacv1.PolicyRule{{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys", "connections"}, Verbs: []string{"get", "list", "watch"}}})
			bindGroup(t, ns, "key-owners", ownerRules)
			existing := &switchboardv1alpha1.APIKey{ObjectMeta: metaName(ns, "existing-key")}
			if err := env.Client.Create(testCtx(t), existing); err != nil {
				t.Fatal(err)
			}
			cfg := env.Config
			if mode == configv1alpha1.OIDCModeImpersonate {
				cfg = impersonator(t)
			}
			base := oidcPanel(t, provider, mode, cfg, nil, nil, panel.Deps{})

			viewer, _ := ssoBrowser(t)
			signInSSO(viewer, t, base, vic)
			do(viewer, t, "viewing the namespace",
				chromedp.Navigate(base+"/keys?namespace="+ns),
				chromedp.WaitVisible(chromedp.CSS(`tr[data-key="existing-key"]`)),
				chromedp.SendKeys(chromedp.CSS(`#create input[name="name"]`), "not-allowed"),
				chromedp.Click(chromedp.CSS("#create-key")),
				chromedp.WaitVisible(chromedp.CSS("#error")),
			)
			if line := textOf(viewer, t, "#error"); !strings.Contains(line, `you may not create apikeys.switchboard.dev in namespace "`+ns+`"`) {
				t.Fatalf("the viewer's create says %q", line)
			}
			var none switchboardv1alpha1.APIKey
			if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "not-allowed"}, &none); err == nil {
				t.Fatal("the viewer created a key")
			}

			outsider, _ := ssoBrowser(t)
			signInSSO(outsider, t, base, nora)
			// The browser asks to be alice, on every request: the panel decides alone whom it acts as.
			do(outsider, t, "sending impersonation headers",
				chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
					_, err := cdp.Call(ctx, target, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
						Headers: network.Headers{"Impersonate-User": "oidc:alice", "Impersonate-Group": "oidc:key-owners"}})
					return err
				}),
				chromedp.Navigate(base+"/keys?namespace="+ns),
				chromedp.WaitVisible(chromedp.CSS("#keys-error")),
			)
			if got := textOf(outsider, t, "#keys-error"); !strings.Contains(got, `you may not list apikeys.switchboard.dev in namespace "`+ns+`"`) {
				t.Fatalf("the outsider's keys section says %q", got)
			}
			if html := get(outsider, t, "reading the page", chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(html, "existing-key") {
				t.Fatal("a person without rights in the namespace sees its key")
			}
			if got := textOf(outsider, t, ".who .user"); got != "oidc:nora" {
				t.Fatalf("the outsider is shown as %q", got)
			}
		})
	}
}
