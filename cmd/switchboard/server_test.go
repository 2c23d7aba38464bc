package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
)

// execute runs cmd with args, returning what it printed (stdout and stderr together).
func execute(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServerCommandDefaults(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ops")
	cmd := serverComponent.command()
	for flag, want := range map[string]string{
		"listen": ":8080", "system-namespace": "ops", "key-prefix": "sb", "panel-listen": "",
		"metrics-bind-address": ":8081", "health-probe-bind-address": ":8082", "auth-failure-burst": "20",
		"auth-failure-rate": "1", "rate-limit-clients": "65536", "last-used-interval": "1m0s",
		"shutdown-delay": "5s", "shutdown-timeout": "30s", "rate-limit-redis": "", "rate-limit-redis-timeout": "50ms",
		"config": "", "print-config": "false",
	} {
		f := cmd.Flags().Lookup(flag)
		if f == nil {
			t.Errorf("--%s is missing", flag)
			continue
		}
		if f.DefValue != want {
			t.Errorf("--%s defaults to %q, want %q", flag, f.DefValue, want)
		}
	}
	if cmd.Flags().Lookup("zap-log-level") == nil {
		t.Error("the zap flags are missing")
	}
	t.Setenv("POD_NAMESPACE", "")
	if got := serverComponent.command().Flags().Lookup("system-namespace").DefValue; got != "switchboard-system" {
		t.Errorf("without POD_NAMESPACE the system namespace defaults to %q", got)
	}
}

// TestServerCommandRefusesBadTrustedProxies: a bad CIDR stops the command before anything runs,
// naming the field.
func TestServerCommandRefusesBadTrustedProxies(t *testing.T) {
	out, err := execute(t, serverComponent.command(), "--trusted-proxies", "not-a-cidr")
	if err == nil || !strings.Contains(err.Error(), `trustedProxies[0]: Invalid value: "not-a-cidr"`) {
		t.Fatalf("a bad --trusted-proxies value: %v\n%s", err, out)
	}
}

// The panel's options left `switchboard server`: its help lists no --panel-* flag, while the
// deprecated flags still work for one release, each warning which configuration field to set.
func TestServerPanelFlagsAreDeprecated(t *testing.T) {
	help, err := execute(t, serverComponent.command(), "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help, "--config") || !strings.Contains(help, "--print-config") {
		t.Fatalf("the help lacks --config and --print-config:\n%s", help)
	}
	if strings.Contains(help, "--panel-") {
		t.Errorf("switchboard server --help lists --panel-* flags:\n%s", help)
	}
	out, err := execute(t, serverComponent.command(), "--panel-listen=:9000", "--panel-max-sessions=5", "--panel-oidc-issuer-url=https://idp.example.com",
		"--panel-oidc-client-id=panel", "--panel-oidc-client-secret-file=/s", "--panel-oidc-redirect-url=https://p.example.com/oidc/callback", "--print-config")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"Flag --panel-max-sessions has been deprecated, set panel.maxSessions in the --config file instead",
		"Flag --panel-listen has been deprecated, set panel.listen in the --config file instead",
		"Flag --panel-oidc-client-id has been deprecated, set panel.oidc.clientID in the --config file instead",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no warning %q in:\n%s", want, out)
		}
	}
	c := printed(t, out, &configv1alpha1.ServerConfiguration{})
	if c.Panel == nil || c.Panel.Listen != ":9000" || *c.Panel.MaxSessions != 5 || *c.Panel.MaxSessionsPerUser != 10 ||
		c.Panel.OIDC == nil || c.Panel.OIDC.ClientID != "panel" || c.Panel.OIDC.Mode != "token" {
		t.Errorf("the deprecated flags did not reach the panel section: %+v", c.Panel)
	}
}

// printed decodes what --print-config wrote (after any warnings): it is a valid configuration.
func printed[T config.Object](t *testing.T, out string, c T) T {
	t.Helper()
	i := strings.Index(out, "apiVersion:")
	if i < 0 {
		t.Fatalf("no configuration printed:\n%s", out)
	}
	if err := config.Decode([]byte(out[i:]), c); err != nil {
		t.Fatalf("the printed configuration does not decode: %v\n%s", err, out)
	}
	return c
}

// The file configures; a flag given overrides it, in the configuration's spelling (0: no
// bound); what neither sets takes its default.
func TestConfigFileAndFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	file := writeFile(t, `apiVersion: config.switchboard.dev/v1alpha1
kind: ServerConfiguration
listen: ":9000"
maxConnections: 5
audience: billing
metricsBindAddress: ""
panel:
  listen: ":9100"
  loginBurst: 3
`)
	out, err := execute(t, serverComponent.command(), "--config", file, "--max-connections=0", "--audience=orders", "--print-config")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c := printed(t, out, &configv1alpha1.ServerConfiguration{})
	if *c.Listen != ":9000" || *c.MaxConnections != 0 || c.Audience != "orders" || *c.MetricsBindAddress != "" ||
		*c.MaxConnectionsPerClient != configv1alpha1.DefaultMaxConnectionsPerClient || c.SystemNamespace != "switchboard-system" ||
		c.Panel.Listen != ":9100" || *c.Panel.LoginBurst != 3 || *c.Panel.MaxSessions != configv1alpha1.DefaultMaxSessions {
		t.Errorf("effective configuration:\n%s", out)
	}
	if strings.Contains(out, "deprecated") {
		t.Errorf("a configuration file's panel section warned:\n%s", out)
	}
}

// Every component prints its defaulted configuration when given nothing, and refuses a file
// with an unknown field, naming the field and the file.
func TestPrintConfigAndUnknownFields(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	for _, tt := range []struct {
		cmd      func() *cobra.Command
		kind     string
		defaults any
	}{
		{serverComponent.command, configv1alpha1.ServerConfigurationKind, func() any {
			c := &configv1alpha1.ServerConfiguration{}
			configv1alpha1.SetDefaults_ServerConfiguration(c)
			return c
		}()},
		{operatorComponent.command, configv1alpha1.OperatorConfigurationKind, func() any {
			c := &configv1alpha1.OperatorConfiguration{}
			configv1alpha1.SetDefaults_OperatorConfiguration(c)
			return c
		}()},
		{panelComponent.command, configv1alpha1.PanelConfigurationKind, func() any {
			c := &configv1alpha1.PanelConfiguration{}
			configv1alpha1.SetDefaults_PanelConfiguration(c)
			return c
		}()},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			out, err := execute(t, tt.cmd(), "--print-config")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			want, err := marshal(tt.defaults)
			if err != nil {
				t.Fatal(err)
			}
			if out != want {
				t.Errorf("--print-config printed\n%s\nwant the defaults\n%s", out, want)
			}
			file := writeFile(t, "apiVersion: config.switchboard.dev/v1alpha1\nkind: "+tt.kind+"\nkeyPrefx: sb\n")
			_, err = execute(t, tt.cmd(), "--config", file, "--print-config")
			if err == nil || !strings.Contains(err.Error(), `unknown field "keyPrefx"`) || !strings.Contains(err.Error(), file) {
				t.Errorf("an unknown field: %v", err)
			}
		})
	}
}

func marshal(c any) (string, error) {
	var b []byte
	var err error
	switch c := c.(type) {
	case *configv1alpha1.ServerConfiguration:
		b, err = config.Marshal(c)
	case *configv1alpha1.OperatorConfiguration:
		b, err = config.Marshal(c)
	case *configv1alpha1.PanelConfiguration:
		b, err = config.Marshal(c)
	}
	return string(b), err
}

func TestPanelFlags(t *testing.T) {
	server, panelCmd := serverComponent.command(), panelComponent.command()
	for flag, want := range map[string]string{
		"panel-secure-cookies": "false", "panel-max-sessions": "1000", "panel-max-sessions-per-user": "10",
		"panel-login-rate": "0.2", "panel-login-burst": "10",
	} {
		for cmd, name := range map[string]string{"server": flag, "panel": flag[len("panel-"):]} {
			c := server
			if cmd == "panel" {
				c = panelCmd
			}
			f := c.Flags().Lookup(name)
			if f == nil {
				t.Errorf("switchboard %s has no --%s", cmd, name)
				continue
			}
			if f.DefValue != want {
				t.Errorf("switchboard %s --%s defaults to %q, want %q", cmd, name, f.DefValue, want)
			}
		}
	}
	out, err := execute(t, panelCmd, "--listen=:9000", "--secure-cookies", "--max-sessions=5", "--print-config")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c := printed(t, out, &configv1alpha1.PanelConfiguration{})
	if *c.Listen != ":9000" || !c.SecureCookies || *c.MaxSessions != 5 || *c.HealthProbeBindAddress != ":8082" {
		t.Errorf("switchboard panel's configuration:\n%s", out)
	}
}

// The OIDC flags, on `switchboard panel` (no prefix) and `switchboard server` (the deprecated
// panel-): no issuer means no single sign-on, and its other flags without an issuer are an
// error naming the missing field rather than silently ignored.
func TestOIDCFlags(t *testing.T) {
	tests := []struct {
		name    string
		cmd     func() *cobra.Command
		args    []string
		want    *configv1alpha1.OIDC
		wantErr string
	}{
		{name: "none", cmd: panelComponent.command},
		{name: "a client id without an issuer", cmd: panelComponent.command, args: []string{"--oidc-client-id=panel"}, wantErr: "oidc.issuerURL: Required value"},
		{name: "server prefix without an issuer", cmd: serverComponent.command, args: []string{"--panel-oidc-mode=impersonate"}, wantErr: "panel.oidc.issuerURL: Required value"},
		{name: "impersonate mode", cmd: panelComponent.command, args: []string{"--oidc-issuer-url=https://idp.example.com", "--oidc-client-id=panel",
			"--oidc-client-secret-file=/etc/secret", "--oidc-redirect-url=https://p.example.com/oidc/callback", "--oidc-mode=impersonate",
			"--oidc-username-claim=email", "--oidc-username-prefix=", "--oidc-scopes=openid,email",
			"--oidc-reveal-url=https://switchboard-reveal.sb.svc:9445", "--oidc-reveal-ca-configmap=sb/switchboard-reveal-ca"},
			want: &configv1alpha1.OIDC{IssuerURL: "https://idp.example.com", ClientID: "panel", ClientSecretFile: "/etc/secret",
				RedirectURL: "https://p.example.com/oidc/callback", Mode: "impersonate", Scopes: []string{"openid", "email"},
				RevealURL: "https://switchboard-reveal.sb.svc:9445", RevealCAConfigMap: "sb/switchboard-reveal-ca",
				UsernameClaim: ptrTo("email"), UsernamePrefix: ptrTo(""), GroupsClaim: ptrTo("groups"), GroupsPrefix: ptrTo("oidc:")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, tt.cmd(), append(tt.args, "--print-config")...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			got := printed(t, out, &configv1alpha1.PanelConfiguration{}).OIDC
			if (got == nil) != (tt.want == nil) || (got != nil && !equalOIDC(*got, *tt.want)) {
				t.Fatalf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func equalOIDC(a, b configv1alpha1.OIDC) bool {
	return a.IssuerURL == b.IssuerURL && a.ClientID == b.ClientID && a.ClientSecretFile == b.ClientSecretFile &&
		a.RevealURL == b.RevealURL && a.RevealCAConfigMap == b.RevealCAConfigMap &&
		a.RedirectURL == b.RedirectURL && a.Mode == b.Mode && strings.Join(a.Scopes, ",") == strings.Join(b.Scopes, ",") &&
		*a.UsernameClaim == *b.UsernameClaim && *a.UsernamePrefix == *b.UsernamePrefix &&
		*a.GroupsClaim == *b.GroupsClaim && *a.GroupsPrefix == *b.GroupsPrefix
}
