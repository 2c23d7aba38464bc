package devenv

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/local/oidcop"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

// SSO in dev: a local OpenID Provider (bin/oidc-op, `make oidc-op`) with one person, whom the
// panel signs in in token mode and the dev kube-apiserver trusts, so that a newcomer tries single
// sign-on with one command.
const (
	// SSOUser signs in on the local provider; the API server knows them as oidc:dev, in group
	// oidc:SSOGroup, which may manage the demo namespace's keys.
	SSOUser    = "dev"
	SSOGroup   = "switchboard-dev"
	ssoClient  = "switchboard-dev-panel"
	ssoCAFile  = "oidc-ca.pem"
	ssoSecret  = "oidc-client-secret"
	ssoBinGlob = "oidc-op-*"
)

// ssoProvider is the running local provider and what the panel and the banner need of it.
type ssoProvider struct {
	*oidcop.Provider
	password string
	authCfg  string // the kube-apiserver's --authentication-config file
	// caFile and secretFile hold the provider's CA and the panel's client secret, in the state
	// dir (0700), as a cluster mounts them.
	caFile, secretFile string
}

// findProvider returns opts.OIDCProvider, or the newest bin/oidc-op-* beside the assets
// (bin/k8s/<version>).
func findProvider(opts Options) (string, error) {
	if opts.OIDCProvider != "" {
		if _, err := os.Stat(opts.OIDCProvider); err != nil {
			return "", fmt.Errorf("--sso-provider: %w", err)
		}
		return opts.OIDCProvider, nil
	}
	matches, _ := filepath.Glob(filepath.Join(opts.Assets, "..", "..", ssoBinGlob))
	if len(matches) == 0 {
		return "", errors.New("--sso needs the local OpenID Provider: run `make oidc-op` (or pass --sso-provider PATH)")
	}
	sort.Strings(matches)
	return matches[len(matches)-1], nil
}

// startSSO starts the provider with a fresh password for SSOUser, and writes the
// AuthenticationConfiguration (the panel's own, as in token mode) and the provider's CA into
// stateDir.
func startSSO(opts Options, stateDir string) (*ssoProvider, error) {
	bin, err := findProvider(opts)
	if err != nil {
		return nil, err
	}
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	password := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
	p, err := oidcop.Start(oidcop.Options{
		Binary:                 bin,
		Users:                  []oidcop.User{{ID: SSOUser, Username: SSOUser, Password: password, Groups: []string{SSOGroup}}},
		ClientID:               ssoClient,
		RedirectURIs:           []string{"http://*.localhost:*/oidc/callback", "http://127.0.0.1:*/oidc/callback"},
		PostLogoutRedirectURIs: []string{`http://*.localhost:*/login\?signed_out=1`, `http://127.0.0.1:*/login\?signed_out=1`},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the local OpenID Provider %s: %w", bin, err)
	}
	sso := &ssoProvider{Provider: p, password: password, authCfg: filepath.Join(stateDir, "authentication-config.yaml"),
		caFile: filepath.Join(stateDir, ssoCAFile), secretFile: filepath.Join(stateDir, ssoSecret)}
	for file, content := range map[string]string{
		sso.authCfg: panel.AuthenticationConfigYAML(sso.section(""), p.CAPEM), sso.caFile: p.CAPEM, sso.secretFile: p.ClientSecret,
	} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			return nil, errors.Join(err, p.Stop())
		}
	}
	return sso, nil
}

// section is the panel's single sign-on section for the provider, in token mode with the
// default claim mapping, with panelURL (ending in /) as the panel's address.
func (p *ssoProvider) section(panelURL string) *configv1alpha1.OIDC {
	return &configv1alpha1.OIDC{
		IssuerURL: p.IssuerURL, ClientID: p.ClientID, ClientSecretFile: p.secretFile, CAFile: p.caFile,
		RedirectURL: panelURL + "oidc/callback", Mode: configv1alpha1.OIDCModeToken, ProviderName: "the local dev provider",
	}
}

// ssoUserObjects let the provider's people manage the demo namespace's keys, with the demo
// panel user's Role.
func ssoUserObjects() []client.Object {
	meta := metav1.ObjectMeta{Namespace: DemoNamespace, Name: "sso-users", Labels: map[string]string{"switchboard.dev/seeded-by": "switchboard-dev"}}
	return []client.Object{&rbacv1.RoleBinding{
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: DemoPanelUser},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: configv1alpha1.DefaultOIDCGroupsPrefix + SSOGroup}},
	}}
}
