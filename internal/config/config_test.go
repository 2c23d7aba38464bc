package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

const header = "apiVersion: config.switchboard.dev/v1alpha1\nkind: ServerConfiguration\n"

// A typo is refused with the field's name and path, and with the file's name: a misspelt
// field must never fall back to its default in silence.
func TestDecodeRefusesWhatATypoMakes(t *testing.T) {
	tests := []struct {
		name, yaml string
		wantErr    []string
	}{
		{name: "an unknown field", yaml: header + "listn: :9000\n", wantErr: []string{`unknown field "listn"`}},
		{name: "an unknown nested field", yaml: header + "authz:\n  grpc:\n    lisen: :9001\n", wantErr: []string{`unknown field "authz.grpc.lisen"`}},
		{name: "an unknown panel field", yaml: header + "panel:\n  maxSesions: 3\n", wantErr: []string{`unknown field "panel.maxSesions"`}},
		{name: "a field given twice", yaml: header + "listen: :1\nlisten: :2\n", wantErr: []string{`"listen"`}},
		{name: "another kind", yaml: "apiVersion: config.switchboard.dev/v1alpha1\nkind: PanelConfiguration\n",
			wantErr: []string{`kind "PanelConfiguration"`, `want apiVersion "config.switchboard.dev/v1alpha1", kind "ServerConfiguration"`}},
		{name: "another version", yaml: "apiVersion: config.switchboard.dev/v1\nkind: ServerConfiguration\n", wantErr: []string{`apiVersion "config.switchboard.dev/v1"`}},
		{name: "no apiVersion", yaml: "listen: :9000\n", wantErr: []string{`apiVersion ""`}},
		{name: "empty", yaml: "", wantErr: []string{"empty"}},
		{name: "a wrong type", yaml: header + "maxConnections: many\n", wantErr: []string{"maxConnections"}},
		{name: "a bad duration", yaml: header + "shutdownDelay: 5 seconds\n", wantErr: []string{"5 seconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "server.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			err := LoadFile(path, &configv1alpha1.ServerConfiguration{})
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.yaml)
			}
			for _, want := range append(tt.wantErr, path) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestDecodeReadsEveryKind(t *testing.T) {
	var s configv1alpha1.ServerConfiguration
	if err := Decode([]byte(header+"listen: :9000\nmaxConnections: 0\nshutdownDelay: 2s\npanel:\n  listen: :9100\n  maxSessions: 5\n"), &s); err != nil {
		t.Fatal(err)
	}
	if *s.Listen != ":9000" || *s.MaxConnections != 0 || s.ShutdownDelay.Duration.String() != "2s" || s.Panel.Listen != ":9100" || *s.Panel.MaxSessions != 5 {
		t.Errorf("decoded %+v", s)
	}
	var o configv1alpha1.OperatorConfiguration
	if err := Decode([]byte("apiVersion: config.switchboard.dev/v1alpha1\nkind: OperatorConfiguration\nwebhook:\n  bindAddress: :9443\n"), &o); err != nil || o.Webhook.BindAddress != ":9443" {
		t.Errorf("decoded %+v, %v", o, err)
	}
	var p configv1alpha1.PanelConfiguration
	if err := Decode([]byte(`{"apiVersion": "config.switchboard.dev/v1alpha1", "kind": "PanelConfiguration", "oidc": {"issuerURL": "https://idp"}}`), &p); err != nil || p.OIDC.IssuerURL != "https://idp" {
		t.Errorf("decoded %+v, %v (JSON is YAML too)", p, err)
	}
}

// What --print-config writes decodes back to the same configuration, and a password in the
// Redis URL never shows.
func TestMarshalRoundTripsAndMasksTheRedisPassword(t *testing.T) {
	c := &configv1alpha1.ServerConfiguration{RateLimitRedis: configv1alpha1.RateLimitRedis{URL: "redis://u:hunter2@redis:6379/0"}}
	configv1alpha1.SetDefaults_ServerConfiguration(c)
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hunter2") {
		t.Fatalf("the printed configuration shows the password:\n%s", out)
	}
	if c.RateLimitRedis.URL != "redis://u:hunter2@redis:6379/0" {
		t.Fatal("Marshal changed the configuration it printed")
	}
	var back configv1alpha1.ServerConfiguration
	if err := Decode(out, &back); err != nil {
		t.Fatalf("the printed configuration does not decode: %v\n%s", err, out)
	}
	if *back.Listen != ":8080" || back.RateLimitRedis.URL != "redis://u:xxxxx@redis:6379/0" {
		t.Errorf("decoded back %+v", back)
	}
}

func TestParsePrefix(t *testing.T) {
	tests := []struct{ in, want string }{
		{"10.0.0.0/8", "10.0.0.0/8"},
		{" 10.1.2.3/8 ", "10.0.0.0/8"},
		{"192.0.2.1", "192.0.2.1/32"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"::1", "::1/128"},
		{"10.0.0.0/33", ""},
		{"proxy.local", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := ParsePrefix(tt.in)
		if (err != nil) != (tt.want == "") || (err == nil && got.String() != tt.want) {
			t.Errorf("ParsePrefix(%q) = %v, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
