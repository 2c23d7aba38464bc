package v1alpha1

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*-defaults.json from the defaults")

// The defaulted empty configuration of each component, against its golden file: a changed
// default is a visible diff of testdata, never a silent one (go test -update rewrites them).
func TestDefaults(t *testing.T) {
	for name, defaulted := range map[string]any{
		"server":   func() any { c := &ServerConfiguration{}; SetDefaults_ServerConfiguration(c); return c }(),
		"operator": func() any { c := &OperatorConfiguration{}; SetDefaults_OperatorConfiguration(c); return c }(),
		"panel":    func() any { c := &PanelConfiguration{}; SetDefaults_PanelConfiguration(c); return c }(),
		// The server's panel section, when present, takes the panel's defaults.
		"server-with-panel": func() any {
			c := &ServerConfiguration{Panel: &ServerPanel{PanelSettings: PanelSettings{OIDC: &OIDC{}}}}
			SetDefaults_ServerConfiguration(c)
			return c.Panel
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(defaulted, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", name+"-defaults.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./api/config/v1alpha1 -update writes it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("the defaults differ from %s (if the change is meant, -update and review the diff):\n%s", path, got)
			}
		})
	}
}

// Defaulting keeps what is set, zero values that mean "disabled" included.
func TestDefaultsKeepWhatIsSet(t *testing.T) {
	zero, none := int32(0), ""
	c := &ServerConfiguration{MaxConnections: &zero, Metrics: Metrics{MetricsBindAddress: &none}, SystemNamespace: "ops"}
	SetDefaults_ServerConfiguration(c)
	if *c.MaxConnections != 0 || *c.MetricsBindAddress != "" || c.SystemNamespace != "ops" {
		t.Errorf("defaulting overwrote set fields: maxConnections %d, metricsBindAddress %q, systemNamespace %q",
			*c.MaxConnections, *c.MetricsBindAddress, c.SystemNamespace)
	}
}
