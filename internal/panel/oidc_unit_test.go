package panel

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// claimMapping is single sign-on in mode mapping the ID token's claims with the prefixes given.
func claimMapping(mode, userClaim, userPrefix, groupsClaim, groupsPrefix string) configv1alpha1.OIDC {
	return configv1alpha1.OIDC{Mode: mode, UsernameClaim: &userClaim, UsernamePrefix: &userPrefix, GroupsClaim: &groupsClaim, GroupsPrefix: &groupsPrefix}
}

func TestMapClaims(t *testing.T) {
	imp := claimMapping(configv1alpha1.OIDCModeImpersonate, "sub", "oidc:", "groups", "oidc:")
	email := claimMapping(configv1alpha1.OIDCModeImpersonate, "email", "", "groups", "oidc:")
	tests := []struct {
		name    string
		opts    configv1alpha1.OIDC
		claims  map[string]any
		want    identity
		wantErr string
	}{
		{"user and groups", imp, map[string]any{"sub": "alice", "groups": []any{"a", "b"}},
			identity{Subject: "alice", Username: "oidc:alice", Groups: []string{"oidc:a", "oidc:b"}}, ""},
		{"one group as a string", imp, map[string]any{"sub": "alice", "groups": "a"},
			identity{Subject: "alice", Username: "oidc:alice", Groups: []string{"oidc:a"}}, ""},
		{"no groups", imp, map[string]any{"sub": "alice"}, identity{Subject: "alice", Username: "oidc:alice"}, ""},
		{"empty group skipped", imp, map[string]any{"sub": "alice", "groups": []any{""}}, identity{Subject: "alice", Username: "oidc:alice"}, ""},
		{"another claim, no prefix", email, map[string]any{"sub": "123", "email": "a@example.com"},
			identity{Subject: "123", Username: "a@example.com"}, ""},
		{"username claim missing", imp, map[string]any{"groups": []any{"a"}}, identity{}, `no "sub" claim`},
		{"username claim empty", imp, map[string]any{"sub": ""}, identity{}, `no "sub" claim`},
		{"username claim not a string", imp, map[string]any{"sub": 42.0}, identity{}, `no "sub" claim`},
		{"groups of another type", imp, map[string]any{"sub": "a", "groups": 1.0}, identity{}, "want a string or a list of strings"},
		{"a group not a string", imp, map[string]any{"sub": "a", "groups": []any{"x", 2.0}}, identity{}, "not only strings"},
		{"system: user refused when impersonating", email, map[string]any{"sub": "1", "email": "system:admin"}, identity{}, "under system:"},
		{"system: group refused when impersonating", claimMapping(configv1alpha1.OIDCModeImpersonate, "sub", "u:", "groups", ""),
			map[string]any{"sub": "a", "groups": []any{"system:masters"}}, identity{}, "under system:"},
		{"system: passed through in token mode (the API server maps)", claimMapping(configv1alpha1.OIDCModeToken, "sub", "", "groups", ""),
			map[string]any{"sub": "a", "groups": []any{"system:masters"}}, identity{Subject: "a", Username: "a", Groups: []string{"system:masters"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mapClaims(tt.claims, &tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestMapClaimsEmailVerified: with the username claim "email", email_verified is read as
// kube-apiserver's OIDC authenticator reads it (getUsername in
// k8s.io/apiserver/plugin/pkg/authenticator/token/oidc): absent, the address is taken; present,
// it must be the boolean true (false, null, or a string or number the API server cannot read as a
// bool refuse). Any other username claim never consults it. Both modes: in token mode the API
// server would refuse the same token, and the person learns why instead of "not trusted".
func TestMapClaimsEmailVerified(t *testing.T) {
	byEmail := claimMapping(configv1alpha1.OIDCModeImpersonate, "email", "oidc:", "groups", "oidc:")
	byEmailToken := claimMapping(configv1alpha1.OIDCModeToken, "email", "oidc:", "groups", "oidc:")
	bySub := claimMapping(configv1alpha1.OIDCModeImpersonate, "sub", "oidc:", "groups", "oidc:")
	// A provider's own claim, not OIDC's "email": not consulted, as by the API server.
	byOtherMail := claimMapping(configv1alpha1.OIDCModeImpersonate, "mail", "oidc:", "groups", "oidc:")
	const addr = "alice@example.com"
	tests := []struct {
		name     string
		opts     configv1alpha1.OIDC
		claims   map[string]any
		wantUser string // empty: refused as unverified
	}{
		{"email, verified", byEmail, map[string]any{"sub": "1", "email": addr, "email_verified": true}, "oidc:" + addr},
		{"email, not verified", byEmail, map[string]any{"sub": "1", "email": addr, "email_verified": false}, ""},
		{"email, email_verified absent (accepted, as by the API server)", byEmail, map[string]any{"sub": "1", "email": addr}, "oidc:" + addr},
		{"email, email_verified null", byEmail, map[string]any{"sub": "1", "email": addr, "email_verified": nil}, ""},
		{`email, email_verified the string "true"`, byEmail, map[string]any{"sub": "1", "email": addr, "email_verified": "true"}, ""},
		{"email, email_verified a number", byEmail, map[string]any{"sub": "1", "email": addr, "email_verified": 1.0}, ""},
		{"email in token mode, not verified", byEmailToken, map[string]any{"sub": "1", "email": addr, "email_verified": false}, ""},
		{"email in token mode, verified", byEmailToken, map[string]any{"sub": "1", "email": addr, "email_verified": true}, "oidc:" + addr},
		{"sub: email_verified false not consulted", bySub, map[string]any{"sub": "1", "email": addr, "email_verified": false}, "oidc:1"},
		{"sub: email_verified garbage not consulted", bySub, map[string]any{"sub": "1", "email_verified": "no"}, "oidc:1"},
		{"another mail claim: not consulted", byOtherMail, map[string]any{"sub": "1", "mail": addr, "email_verified": false}, "oidc:" + addr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mapClaims(tt.claims, &tt.opts)
			if tt.wantUser == "" {
				if !errors.Is(err, errEmailNotVerified) {
					t.Fatalf("got %+v, %v; want errEmailNotVerified", got, err)
				}
				// The message is shown to the person and logged: never the address.
				if strings.Contains(err.Error(), addr) {
					t.Fatalf("the error shows the address: %v", err)
				}
				return
			}
			if err != nil || got.Username != tt.wantUser {
				t.Fatalf("got %+v, %v; want user %q", got, err, tt.wantUser)
			}
		})
	}
}

// The provider's side of sign-in reads the client secret (and the CA) from the files the
// configuration names, once: an error names the file, never what it holds; the scopes always
// ask for "openid", and the sign-in button has a label. (What the section must say is checked
// by its validation, internal/config.)
func TestNewOIDCAuth(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("s3cret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not-pem")
	if err := os.WriteFile(notPEM, []byte("s3cret-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		change  func(*configv1alpha1.OIDC)
		wantErr string
	}{
		{"valid", func(*configv1alpha1.OIDC) {}, ""},
		{"missing secret file", func(o *configv1alpha1.OIDC) { o.ClientSecretFile = filepath.Join(dir, "nope") }, "reading the client secret file"},
		{"empty secret file", func(o *configv1alpha1.OIDC) { o.ClientSecretFile = empty }, "is empty"},
		{"missing CA file", func(o *configv1alpha1.OIDC) { o.CAFile = filepath.Join(dir, "ca.pem") }, "reading the CA file"},
		{"a CA file without a certificate", func(o *configv1alpha1.OIDC) { o.CAFile = notPEM }, "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &configv1alpha1.PanelSettings{OIDC: &configv1alpha1.OIDC{IssuerURL: "https://idp.example.com", ClientID: "panel",
				ClientSecretFile: secretFile, RedirectURL: "https://panel.example.com/oidc/callback", Scopes: []string{"email"}}}
			configv1alpha1.SetDefaults_PanelSettings(s)
			tt.change(s.OIDC)
			a, err := newOIDCAuth(s.OIDC)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if a.clientSecret != "s3cret-value" || !reflect.DeepEqual(a.scopes, []string{"openid", "email"}) || a.providerName != "single sign-on" {
					t.Fatalf("secret, scopes or label: %q %v %q", a.clientSecret, a.scopes, a.providerName)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one with %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret-value") {
				t.Fatal("the error shows the secret")
			}
		})
	}
}

func TestAuthenticationConfigYAML(t *testing.T) {
	o := claimMapping(configv1alpha1.OIDCModeToken, "email", "", "groups", "idp:")
	o.IssuerURL, o.ClientID = "https://idp.example.com", "panel"
	var doc struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		JWT        []struct {
			Issuer struct {
				URL                  string   `json:"url"`
				Audiences            []string `json:"audiences"`
				CertificateAuthority string   `json:"certificateAuthority"`
			} `json:"issuer"`
			ClaimMappings struct {
				Username struct{ Claim, Prefix *string } `json:"username"`
				Groups   struct{ Claim, Prefix *string } `json:"groups"`
			} `json:"claimMappings"`
		} `json:"jwt"`
	}
	if err := yaml.UnmarshalStrict([]byte(AuthenticationConfigYAML(&o, "PEM")), &doc); err != nil {
		t.Fatal(err)
	}
	j := doc.JWT[0]
	// The username prefix must be present even when empty: the API server requires it to be set.
	if doc.APIVersion != "apiserver.config.k8s.io/v1" || doc.Kind != "AuthenticationConfiguration" || j.Issuer.URL != o.IssuerURL ||
		!reflect.DeepEqual(j.Issuer.Audiences, []string{"panel"}) || j.Issuer.CertificateAuthority != "PEM" ||
		j.ClaimMappings.Username.Claim == nil || *j.ClaimMappings.Username.Claim != "email" ||
		j.ClaimMappings.Username.Prefix == nil || *j.ClaimMappings.Username.Prefix != "" || *j.ClaimMappings.Groups.Prefix != "idp:" {
		t.Fatalf("unexpected configuration: %+v", doc)
	}
}

func TestCredsTransport(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	t.Cleanup(srv.Close)
	tests := []struct {
		name  string
		creds *sessionCreds
		want  map[string][]string
	}{
		{"token", &sessionCreds{mode: configv1alpha1.OIDCModeToken, bearer: "id-token"},
			map[string][]string{"Authorization": {"Bearer id-token"}, "Impersonate-User": nil, "Impersonate-Group": nil, "Impersonate-Extra-Scopes": nil}},
		{"impersonate", &sessionCreds{mode: configv1alpha1.OIDCModeImpersonate, impersonate: identity{Username: "oidc:a", Groups: []string{"oidc:x", "oidc:y"}}},
			map[string][]string{"Authorization": {"Bearer panel"}, "Impersonate-User": {"oidc:a"}, "Impersonate-Group": {"oidc:x", "oidc:y"}, "Impersonate-Extra-Scopes": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Header.Set("Authorization", "Bearer panel")
			req.Header.Set("Impersonate-User", "someone-else")
			req.Header.Add("Impersonate-Group", "system:masters")
			req.Header.Set("Impersonate-Extra-Scopes", "x")
			resp, err := (&credsTransport{next: http.DefaultTransport, creds: tt.creds}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			for k, v := range tt.want {
				if !reflect.DeepEqual(got.Values(k), v) {
					t.Errorf("%s: %q, want %q", k, got.Values(k), v)
				}
			}
		})
	}
}

func TestFlows(t *testing.T) {
	a := &oidcAuth{flows: map[string]*flow{}}
	now := time.Now()
	id, f, err := a.start(now)
	if err != nil {
		t.Fatal(err)
	}
	if f.state == "" || f.nonce == "" || len(f.verifier) < 43 || f.state == f.nonce || id == f.state {
		t.Fatalf("weak flow: %+v", f)
	}
	if _, ok := a.take(id, now.Add(flowTTL+time.Second)); ok {
		t.Fatal("an expired sign-in completed")
	}
	id, _, _ = a.start(now)
	if _, ok := a.take(id, now); !ok {
		t.Fatal("a fresh sign-in did not complete")
	}
	if _, ok := a.take(id, now); ok {
		t.Fatal("a sign-in completed twice")
	}
	for range maxFlows {
		if _, _, err := a.start(now); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := a.start(now); !errors.Is(err, errTooManyFlows) {
		t.Fatalf("past maxFlows: %v", err)
	}
	if _, _, err := a.start(now.Add(flowTTL + time.Second)); err != nil {
		t.Fatalf("expired sign-ins were not dropped: %v", err)
	}
}

// The sample in docs and the configuration the panel prints are AuthenticationConfigurations
// kube-apiserver reads: every field known to apiserver.config.k8s.io/v1 (strict), the issuer
// and the claim mappings set. (The panel's tests also start kube-apiserver with the printed one.)
func TestAuthenticationConfigsParseStrictly(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join("..", "..", "docs", "authentication-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The panel's defaults, unset.
	o := configv1alpha1.OIDC{IssuerURL: "https://idp.example.com", ClientID: "switchboard-panel"}
	printed := AuthenticationConfigYAML(&o, "")
	for name, doc := range map[string]string{"docs/authentication-config.yaml": string(sample), "printed": printed} {
		var c apiserverv1.AuthenticationConfiguration
		if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.Kind != "AuthenticationConfiguration" || c.APIVersion != "apiserver.config.k8s.io/v1" || len(c.JWT) != 1 {
			t.Fatalf("%s: not one jwt authenticator of apiserver.config.k8s.io/v1: %+v", name, c)
		}
		j := c.JWT[0]
		if j.Issuer.URL != o.IssuerURL || !reflect.DeepEqual(j.Issuer.Audiences, []string{o.ClientID}) ||
			j.ClaimMappings.Username.Claim != "sub" || j.ClaimMappings.Username.Prefix == nil || *j.ClaimMappings.Username.Prefix != "oidc:" ||
			j.ClaimMappings.Groups.Claim != "groups" || j.ClaimMappings.Groups.Prefix == nil || *j.ClaimMappings.Groups.Prefix != "oidc:" {
			t.Fatalf("%s: issuer or claim mappings differ from the panel's defaults: %+v", name, j)
		}
	}
}
