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
)

func TestMapClaims(t *testing.T) {
	token := OIDCOptions{Mode: OIDCModeToken, UsernameClaim: "sub", UsernamePrefix: "oidc:", GroupsClaim: "groups", GroupsPrefix: "oidc:"}
	imp := token
	imp.Mode = OIDCModeImpersonate
	email := imp
	email.UsernameClaim, email.UsernamePrefix = "email", ""
	tests := []struct {
		name    string
		opts    OIDCOptions
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
		{"system: group refused when impersonating", OIDCOptions{Mode: OIDCModeImpersonate, UsernameClaim: "sub", UsernamePrefix: "u:", GroupsClaim: "groups"},
			map[string]any{"sub": "a", "groups": []any{"system:masters"}}, identity{}, "under system:"},
		{"system: passed through in token mode (the API server maps)", OIDCOptions{Mode: OIDCModeToken, UsernameClaim: "sub", GroupsClaim: "groups"},
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
	byEmail := OIDCOptions{Mode: OIDCModeImpersonate, UsernameClaim: "email", UsernamePrefix: "oidc:", GroupsClaim: "groups", GroupsPrefix: "oidc:"}
	byEmailToken := byEmail
	byEmailToken.Mode = OIDCModeToken
	bySub := byEmail
	bySub.UsernameClaim = "sub"
	byOtherMail := byEmail
	byOtherMail.UsernameClaim = "mail" // a provider's own claim, not OIDC's "email": not consulted, as by the API server
	const addr = "alice@example.com"
	tests := []struct {
		name     string
		opts     OIDCOptions
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

// impersonate switches options to impersonate mode with the reveal endpoint url and bundle.
func impersonate(url, bundle string) func(*OIDCOptions) {
	return func(o *OIDCOptions) { o.Mode, o.RevealURL, o.RevealBundle = OIDCModeImpersonate, url, bundle }
}

func TestOIDCOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("s3cret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	good := func() OIDCOptions {
		return OIDCOptions{IssuerURL: "https://idp.example.com", ClientID: "panel", ClientSecretFile: secretFile,
			RedirectURL: "https://panel.example.com/oidc/callback", Mode: OIDCModeToken}
	}
	tests := []struct {
		name    string
		change  func(*OIDCOptions)
		wantErr string
	}{
		{"valid", func(*OIDCOptions) {}, ""},
		{"no mode", func(o *OIDCOptions) { o.Mode = "" }, "no mode"},
		{"unknown mode", func(o *OIDCOptions) { o.Mode = "sudo" }, `unknown mode "sudo"`},
		{"plain-http issuer", func(o *OIDCOptions) { o.IssuerURL = "http://idp.example.com" }, "https URL"},
		{"no issuer", func(o *OIDCOptions) { o.IssuerURL = "" }, "https URL"},
		{"no client id", func(o *OIDCOptions) { o.ClientID = "" }, "no client id"},
		{"secret twice", func(o *OIDCOptions) { o.ClientSecret = "x" }, "not both"},
		{"no secret", func(o *OIDCOptions) { o.ClientSecretFile = "" }, "no client secret"},
		{"missing secret file", func(o *OIDCOptions) { o.ClientSecretFile = filepath.Join(dir, "nope") }, "reading the client secret file"},
		{"empty secret file", func(o *OIDCOptions) { o.ClientSecretFile = empty }, "is empty"},
		{"redirect elsewhere", func(o *OIDCOptions) { o.RedirectURL = "https://panel.example.com/callback" }, "ending in /oidc/callback"},
		{"relative redirect", func(o *OIDCOptions) { o.RedirectURL = "/oidc/callback" }, "ending in /oidc/callback"},
		{"missing CA file", func(o *OIDCOptions) { o.CAFile = filepath.Join(dir, "ca.pem") }, "reading the CA file"},
		{"impersonate with the reveal endpoint", impersonate("https://switchboard-reveal.sb.svc:9445", "sb/switchboard-reveal-ca"), ""},
		{"impersonate without the reveal endpoint", impersonate("", ""), "reveal endpoint"},
		{"reveal endpoint over plain http", impersonate("http://switchboard-reveal.sb.svc:9445", "sb/switchboard-reveal-ca"), "https://HOST:PORT"},
		{"reveal endpoint with a path", impersonate("https://switchboard-reveal.sb.svc:9445/reveal", "sb/switchboard-reveal-ca"), "https://HOST:PORT"},
		{"reveal bundle without a namespace", impersonate("https://switchboard-reveal.sb.svc:9445", "switchboard-reveal-ca"), "NAMESPACE/NAME"},
		{"reveal endpoint in token mode", func(o *OIDCOptions) { o.RevealURL = "https://switchboard-reveal.sb.svc:9445" }, "impersonate mode only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good()
			tt.change(&o)
			err := o.validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if o.ClientSecret != "s3cret-value" || o.Scopes[0] != "openid" || o.UsernameClaim != "sub" || o.GroupsPrefix != "oidc:" {
					t.Fatalf("defaults not applied: %+v", o)
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
	o := OIDCOptions{IssuerURL: "https://idp.example.com", ClientID: "panel", UsernameClaim: "email", UsernamePrefix: "", GroupsClaim: "groups", GroupsPrefix: "idp:"}
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
		{"token", &sessionCreds{mode: OIDCModeToken, bearer: "id-token"},
			map[string][]string{"Authorization": {"Bearer id-token"}, "Impersonate-User": nil, "Impersonate-Group": nil, "Impersonate-Extra-Scopes": nil}},
		{"impersonate", &sessionCreds{mode: OIDCModeImpersonate, impersonate: identity{Username: "oidc:a", Groups: []string{"oidc:x", "oidc:y"}}},
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
	o := OIDCOptions{IssuerURL: "https://idp.example.com", ClientID: "switchboard-panel", UsernameClaim: "sub", UsernamePrefix: "oidc:", GroupsClaim: "groups", GroupsPrefix: "oidc:"}
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
