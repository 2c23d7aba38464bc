package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/switchboard-dev/switchboard/internal/panel"
)

// The OIDC flags, on `switchboard panel` (no prefix) and `switchboard server` (panel-): no
// issuer means no single sign-on, and its other flags without an issuer are an error rather
// than silently ignored.
func TestOIDCFlags(t *testing.T) {
	tests := []struct {
		name    string
		prefix  string
		args    []string
		want    *panel.OIDCOptions
		wantErr string
	}{
		{name: "none", want: nil},
		{name: "a client id without an issuer", args: []string{"--oidc-client-id=panel"}, wantErr: "--oidc-client-id given without --oidc-issuer-url"},
		{name: "server prefix without an issuer", prefix: "panel-", args: []string{"--panel-oidc-mode=impersonate"}, wantErr: "--panel-oidc-mode given without --panel-oidc-issuer-url"},
		{name: "impersonate mode", args: []string{"--oidc-issuer-url=https://idp.example.com", "--oidc-client-id=panel",
			"--oidc-client-secret-file=/etc/secret", "--oidc-redirect-url=https://p.example.com/oidc/callback", "--oidc-mode=impersonate",
			"--oidc-username-claim=email", "--oidc-username-prefix=", "--oidc-scopes=openid,email"},
			want: &panel.OIDCOptions{IssuerURL: "https://idp.example.com", ClientID: "panel", ClientSecretFile: "/etc/secret",
				RedirectURL: "https://p.example.com/oidc/callback", Mode: panel.OIDCModeImpersonate, Scopes: []string{"openid", "email"},
				UsernameClaim: "email", UsernamePrefix: "", GroupsClaim: "groups", GroupsPrefix: "oidc:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := pflag.NewFlagSet("test", pflag.ContinueOnError)
			var o panel.Options
			bindPanelFlags(f, &o, tt.prefix)
			if err := f.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := finishOIDCFlags(f, &o, tt.prefix)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(o.OIDC, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", o.OIDC, err, tt.want)
			}
		})
	}
}
