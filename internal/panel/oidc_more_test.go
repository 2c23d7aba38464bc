//go:build !unit

package panel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestImpersonatorGrant: the ServiceAccount of impersonate mode, with exactly the chart's grant,
// acts as a person on the panel's resources only. Even as a person who may do anything in a
// namespace it cannot touch any other resource, list Secrets, become a ServiceAccount, a node
// or system:masters, nor read a Secret as itself.
func TestImpersonatorGrant(t *testing.T) {
	ns := env.Namespace(t, "grant")
	bindGroup(t, ns, "key-owners", []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}})
	secret := &corev1.Secret{ObjectMeta: metaName(ns, "database"), StringData: map[string]string{"password": "hunter2"}}
	if err := env.Client.Create(testCtx(t), secret); err != nil {
		t.Fatal(err)
	}
	cfg := impersonator(t)
	// Discovery as an administrator: the impersonator may not discover, nor need to.
	mapper := env.Client.RESTMapper()
	as := func(user string, groups ...string) client.Client {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
		cl, err := client.New(c, client.Options{Scheme: scheme.Scheme, Mapper: mapper})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	self, err := client.New(cfg, client.Options{Scheme: scheme.Scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	alice := as("oidc:alice", "oidc:key-owners")
	// What the panel does as the person works.
	if err := alice.List(ctx, &switchboardv1alpha1.APIKeyList{}, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing APIKeys as oidc:alice: %v", err)
	}
	forbidden := []struct {
		name string
		call func() error
	}{
		{"reading a Secret as itself", func() error { return self.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}) }},
		{"listing APIKeys as itself", func() error { return self.List(ctx, &switchboardv1alpha1.APIKeyList{}, client.InNamespace(ns)) }},
		{"listing Secrets as oidc:alice", func() error { return alice.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)) }},
		// oidc:alice may do anything in ns; the panel may not read or delete her Secrets for her.
		{"reading a Secret as oidc:alice", func() error { return alice.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}) }},
		{"deleting a Secret as oidc:alice", func() error { return alice.Delete(ctx, secret.DeepCopy()) }},
		{"updating a Secret as oidc:alice", func() error {
			s := secret.DeepCopy()
			s.StringData = map[string]string{"password": "changed"}
			return alice.Update(ctx, s)
		}},
		{"listing ConfigMaps as oidc:alice", func() error { return alice.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)) }},
		{"listing Pods as oidc:alice", func() error { return alice.List(ctx, &corev1.PodList{}, client.InNamespace(ns)) }},
		{"creating a RoleBinding as oidc:alice", func() error {
			return alice.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metaName(ns, "escalate"),
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "oidc:mallory"}}})
		}},
		{"patching an APIKey's status as oidc:alice", func() error {
			k := &switchboardv1alpha1.APIKey{ObjectMeta: metaName(ns, "nope")}
			return alice.Status().Update(ctx, k)
		}},
		{"listing APIKeys as a ServiceAccount", func() error {
			return as("system:serviceaccount:"+ns+":default").List(ctx, &switchboardv1alpha1.APIKeyList{}, client.InNamespace(ns))
		}},
		{"listing APIKeys as a node", func() error {
			return as("system:node:worker").List(ctx, &switchboardv1alpha1.APIKeyList{}, client.InNamespace(ns))
		}},
		{"listing APIKeys in system:masters", func() error {
			return as("oidc:alice", "system:masters").List(ctx, &switchboardv1alpha1.APIKeyList{}, client.InNamespace(ns))
		}},
	}
	for _, f := range forbidden {
		if err := f.call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", f.name, err)
		}
	}
	// And it holds no legacy, unlimited impersonation.
	cs := kubernetes.NewForConfigOrDie(cfg)
	review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Resource: "users", Verb: "impersonate"}}}, metav1.CreateOptions{})
	if err != nil || review.Status.Allowed {
		t.Fatalf("the grant allows legacy impersonation (or the review failed: %v)", err)
	}
}

// TestImpersonateModeRefusesLegacyGrant: impersonate mode does not start with only the legacy
// "impersonate" verb unless allowed, nor without any grant.
func TestImpersonateModeRefusesLegacyGrant(t *testing.T) {
	ns := env.Namespace(t, "legacy")
	legacy := env.ServiceAccount(t, ns, "legacy")
	bindCluster(t, "legacy-impersonator-"+ns, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"users", "groups"}, Verbs: []string{"impersonate"}}},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "legacy"})
	bindReveal(t, "legacy-reveal-"+ns, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "legacy"})
	nothing := env.ServiceAccount(t, ns, "nothing")
	secret := clientSecretFile(t, provider)
	opts := func(allow bool) *configv1alpha1.PanelSettings {
		return &configv1alpha1.PanelSettings{OIDC: mapping(&configv1alpha1.OIDC{IssuerURL: provider.IssuerURL, ClientID: provider.ClientID, ClientSecretFile: secret,
			RedirectURL: "http://x.localhost:1/oidc/callback", Mode: configv1alpha1.OIDCModeImpersonate, AllowLegacyImpersonation: allow,
			RevealURL: sys.RevealURL, RevealCAConfigMap: sys.RevealBundle})}
	}
	as := func(cfg *rest.Config) panel.Deps { return panel.Deps{RESTConfig: cfg} }
	if _, err := panel.NewHandler(opts(false), nil, as(legacy)); err == nil || !strings.Contains(err.Error(), `legacy "impersonate" verb`) {
		t.Fatalf("with only the legacy verb: %v, want a refusal naming it", err)
	}
	if _, err := panel.NewHandler(opts(true), nil, as(legacy)); err != nil {
		t.Fatalf("with the legacy verb explicitly allowed: %v", err)
	}
	if _, err := panel.NewHandler(opts(true), nil, as(nothing)); err == nil || !strings.Contains(err.Error(), "impersonate:user-info on users.authentication.k8s.io") {
		t.Fatalf("without any grant: %v, want a refusal naming the missing verbs", err)
	}
	// The impersonation grant without the reveal endpoint's: no key could be shown.
	noReveal := env.ServiceAccount(t, ns, "noreveal")
	var rules []rbacv1.PolicyRule
	for _, r := range panel.ImpersonationRules {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{r.Group}, Resources: r.Resources, Verbs: r.Verbs})
	}
	bindCluster(t, "noreveal-"+ns, rules, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "noreveal"})
	if _, err := panel.NewHandler(opts(false), nil, as(noReveal)); err == nil || !strings.Contains(err.Error(), "post /reveal") {
		t.Fatalf("without the reveal endpoint's grant: %v, want a refusal naming it", err)
	}
}

// TestOIDCUntrustedIssuer: in token mode, a provider the API server does not trust is reported
// at sign-in with the exact AuthenticationConfiguration to add, and no session starts.
func TestOIDCUntrustedIssuer(t *testing.T) {
	opts := oidcRedirects
	opts.Users, opts.ClientID = []testenv.OIDCUser{alice}, oidcClientID
	other, err := testenv.StartOIDCProvider(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop() })
	base := oidcPanel(t, other, configv1alpha1.OIDCModeToken, env.Config, nil, nil, panel.Deps{})
	ctx, _ := newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", other.SPKIHash))
	loginAt(ctx, t, base, alice)
	waitVisible(ctx, t, "the untrusted-issuer error", "#trust-config")
	cfg := textOf(ctx, t, "#trust-config")
	for _, want := range []string{"kind: AuthenticationConfiguration", "url: " + other.IssuerURL, "- " + oidcClientID, "claim: sub", "prefix: 'oidc:'"} {
		if !strings.Contains(cfg, want) {
			t.Fatalf("the configuration shown lacks %q:\n%s", want, cfg)
		}
	}
	if msg := textOf(ctx, t, "#error"); !strings.Contains(msg, "does not accept its ID tokens") {
		t.Fatalf("the error says %q", msg)
	}
	do(ctx, t, "opening the keys", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#sso-sign-in")))
}

// loginAt clicks the sign-in button and logs in on the provider's page, whatever follows.
func loginAt(ctx context.Context, t *testing.T, base string, u testenv.OIDCUser) {
	t.Helper()
	do(ctx, t, "signing in as "+u.Username,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#sso-sign-in")),
		chromedp.Click(chromedp.CSS("#sso-sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), u.Username),
		chromedp.SendKeys(chromedp.CSS("#password"), u.Password),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
	)
}

// TestOIDCRefresh: once half of the ID token's lifetime has passed the panel renews it with
// the refresh token, and the session goes on; when the provider no longer answers the
// refresh, the session ends.
func TestOIDCRefresh(t *testing.T) {
	opts := oidcRedirects
	opts.Users, opts.ClientID = []testenv.OIDCUser{alice}, oidcClientID
	other, err := testenv.StartOIDCProvider(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop() })
	ns := env.Namespace(t, "sso-refresh")
	bindGroup(t, ns, "key-owners", ownerRules)
	clock := clocktesting.NewFakeClock(time.Now())
	var logs logBuffer
	// Impersonate mode: the panel checks the ID tokens itself, so this provider needs no trust
	// from the API server.
	base := oidcPanel(t, other, configv1alpha1.OIDCModeImpersonate, impersonator(t), nil, nil, panel.Deps{
		Clock: clock, Logger: logs.logger(), SessionIdleTimeout: 3 * time.Hour})
	ctx, _ := newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", other.SPKIHash))
	loginAt(ctx, t, base, alice)
	waitVisible(ctx, t, "the keys page", "#api-keys")
	tokens := strings.Count(other.Log(), "path=/oauth/token")

	clock.Step(31 * time.Minute)
	do(ctx, t, "opening the keys after 31 minutes", chromedp.Navigate(base+"/keys?namespace="+ns))
	waitVisible(ctx, t, "the keys page", "#api-keys")
	if strings.Count(other.Log(), "path=/oauth/token") <= tokens || !strings.Contains(logs.String(), "refreshed the session's ID token") {
		t.Fatalf("no refresh after half the ID token's lifetime; panel log:\n%s", logs.String())
	}
	clock.Step(10 * time.Minute)
	do(ctx, t, "opening the keys 10 minutes later", chromedp.Navigate(base+"/keys?namespace="+ns))
	waitVisible(ctx, t, "the keys page", "#api-keys")

	if err := other.Stop(); err != nil {
		t.Fatal(err)
	}
	clock.Step(31 * time.Minute)
	do(ctx, t, "opening the keys with the provider gone", chromedp.Navigate(base+"/keys?namespace="+ns))
	waitVisible(ctx, t, "the sign-in page", "#sso-sign-in")
	if !strings.Contains(logs.String(), "OIDC refresh refused; ending the session") {
		t.Fatalf("the panel did not say why the session ended:\n%s", logs.String())
	}
}
