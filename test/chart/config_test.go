//go:build !unit

package chart

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
)

// configPath is where each Deployment mounts its configuration and reads it from.
const configPath = "/etc/switchboard/config/config.yaml"

// configData returns the configuration file of component ("server", "operator", "panel") as the
// chart renders it into its ConfigMap, after checking that the component's Deployment mounts
// that ConfigMap at configPath, reads it with --config, and carries its checksum.
func configData(t *testing.T, objs []*unstructured.Unstructured, component string) string {
	t.Helper()
	cm := find(objs, "ConfigMap", "switchboard-"+component+"-config")
	if cm == nil {
		t.Fatalf("no ConfigMap switchboard-%s-config", component)
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	deploy := find(objs, "Deployment", "switchboard-"+component)
	if deploy == nil {
		t.Fatalf("no Deployment switchboard-%s", component)
	}
	pod, _, _ := unstructured.NestedMap(deploy.Object, "spec", "template")
	container := pod["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(container, "args")
	if !slices.Contains(args, "--config="+configPath) {
		t.Errorf("%s: the container does not read %s: args %q", component, configPath, args)
	}
	mounted := false
	mounts, _, _ := unstructured.NestedSlice(container, "volumeMounts")
	volumes, _, _ := unstructured.NestedSlice(pod, "spec", "volumes")
	for _, m := range mounts {
		m := m.(map[string]any)
		if m["mountPath"] != "/etc/switchboard/config" {
			continue
		}
		for _, v := range volumes {
			v := v.(map[string]any)
			name, _, _ := unstructured.NestedString(v, "configMap", "name")
			mounted = mounted || (v["name"] == m["name"] && name == cm.GetName() && m["readOnly"] == true)
		}
	}
	if !mounted {
		t.Errorf("%s: ConfigMap %s is not mounted read-only at /etc/switchboard/config", component, cm.GetName())
	}
	sum := sha256.Sum256([]byte(strings.TrimSuffix(data, "\n")))
	if got, _, _ := unstructured.NestedString(pod, "metadata", "annotations", "checksum/config"); got != hex.EncodeToString(sum[:]) {
		t.Errorf("%s: the pods' checksum/config %q is not the sha256 of the configuration", component, got)
	}
	return data
}

// load decodes a rendered configuration strictly (an unknown field fails), defaults and
// validates it: the chart renders only configurations the component starts from.
func load[T config.Object](t *testing.T, data string, into T, setDefaults func(T), validate func(T) field.ErrorList) T {
	t.Helper()
	if err := config.Decode([]byte(data), into); err != nil {
		t.Fatalf("the chart's configuration does not decode: %v\n%s", err, data)
	}
	setDefaults(into)
	if errs := validate(into); len(errs) > 0 {
		err := errs.ToAggregate()
		t.Fatalf("the chart's configuration is invalid: %v\n%s", err, data)
	}
	return into
}

func serverConfig(t *testing.T, objs []*unstructured.Unstructured) *configv1alpha1.ServerConfiguration {
	t.Helper()
	return load(t, configData(t, objs, "server"), &configv1alpha1.ServerConfiguration{}, configv1alpha1.SetDefaults_ServerConfiguration, config.ValidateServerConfiguration)
}

func operatorConfig(t *testing.T, objs []*unstructured.Unstructured) *configv1alpha1.OperatorConfiguration {
	t.Helper()
	return load(t, configData(t, objs, "operator"), &configv1alpha1.OperatorConfiguration{}, configv1alpha1.SetDefaults_OperatorConfiguration, config.ValidateOperatorConfiguration)
}

func panelConfig(t *testing.T, objs []*unstructured.Unstructured) *configv1alpha1.PanelConfiguration {
	t.Helper()
	return load(t, configData(t, objs, "panel"), &configv1alpha1.PanelConfiguration{}, configv1alpha1.SetDefaults_PanelConfiguration, config.ValidatePanelConfiguration)
}

// TestChartConfigurations: in every rendering, each component's ConfigMap holds a valid
// configuration of its kind that the strict decoder reads, mounted and read by its Deployment;
// the values reach it, and no Secret does (the files are named instead).
func TestChartConfigurations(t *testing.T) {
	sso := append(ssoValues("impersonate"), "panel.oidc.caConfigMap.name=idp-ca", "panel.oidc.providerName=Corp SSO")
	for name, sets := range map[string][]string{"defaults": nil, "every feature": allFeatures, "single sign-on": sso,
		"values at their edges": {"server.authFailureRate=-1", "operator.minRenewalInterval=-1s", "operator.minRenewalIntervalPercentage=-1",
			"server.rateLimit.redis.url=redis://redis:6379", "server.rateLimit.redis.passwordSecret.name=redis-auth", "keyPrefix=acme"}} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, sets)
			s, o, p := serverConfig(t, objs), operatorConfig(t, objs), panelConfig(t, objs)
			if s.SystemNamespace != releaseNamespace || o.SystemNamespace != releaseNamespace {
				t.Errorf("system namespaces %q, %q; want the release's", s.SystemNamespace, o.SystemNamespace)
			}
			if s.Panel != nil {
				t.Errorf("the server serves the panel too although it runs apart: %+v", s.Panel)
			}
			switch name {
			case "defaults":
				if *s.Listen != ":8080" || *s.HealthProbeBindAddress != ":8082" || *o.LeaderElect != true || o.Webhook.BindAddress != ":9443" ||
					*p.Listen != ":8083" || p.OIDC != nil {
					t.Errorf("the default configurations: server %+v, operator %+v, panel %+v", s, o, p)
				}
			case "single sign-on":
				want := configv1alpha1.OIDC{IssuerURL: "https://idp.example.com", ClientSecretFile: "/etc/switchboard/oidc/client-secret", Mode: "impersonate",
					CAFile: "/etc/switchboard/oidc-ca/ca.crt", ProviderName: "Corp SSO",
					RevealURL: "https://switchboard-reveal." + releaseNamespace + ".svc:9445", RevealCAConfigMap: releaseNamespace + "/switchboard-reveal-ca"}
				if p.OIDC == nil || p.OIDC.IssuerURL != want.IssuerURL || p.OIDC.ClientSecretFile != want.ClientSecretFile || p.OIDC.Mode != want.Mode ||
					p.OIDC.CAFile != want.CAFile || p.OIDC.ProviderName != want.ProviderName || p.OIDC.RevealURL != want.RevealURL ||
					p.OIDC.RevealCAConfigMap != want.RevealCAConfigMap {
					t.Errorf("the panel's single sign-on %+v, want %+v", p.OIDC, want)
				}
				if o.Reveal.BindAddress != ":9445" || len(o.Reveal.Names) != 3 {
					t.Errorf("the operator's reveal endpoint: %+v", o.Reveal)
				}
			case "values at their edges":
				if *s.AuthFailureLimit.Rate != 0 || o.MinRenewalInterval.Duration != 0 || *o.MinRenewalIntervalPercentage != 0 ||
					s.RateLimitRedis.URL != "redis://redis:6379" || s.KeyPrefix != "acme" || o.KeyPrefix != "acme" {
					t.Errorf("negative values are not 'none' (0): server %+v, operator %+v", s, o)
				}
			}
			for _, cm := range []string{"server", "operator", "panel"} {
				data := configData(t, objs, cm)
				for _, secret := range []string{"redis-auth", "panel-oidc"} {
					if strings.Contains(data, secret) {
						t.Errorf("the %s configuration mentions %q:\n%s", cm, secret, data)
					}
				}
			}
		})
	}
	// The panel served by the server (panel.separate=false is refused by the schema with
	// single sign-on, not without): its settings are the server's panel section.
	objs := render(t, []string{"panel.separate=false", "panel.maxSessions=7"})
	if s := serverConfig(t, objs); s.Panel == nil || s.Panel.Listen != ":8083" || *s.Panel.MaxSessions != 7 {
		t.Errorf("the server's panel section: %+v", s.Panel)
	}
	if find(objs, "ConfigMap", "switchboard-panel-config") != nil {
		t.Error("a panel configuration is rendered with no panel Deployment")
	}
}

// TestChartConfigChangeRollsPods: a value that changes a component's configuration changes its
// pods' checksum/config (so the Deployment rolls them), and only its.
func TestChartConfigChangeRollsPods(t *testing.T) {
	checksums := func(sets ...string) map[string]string {
		objs := render(t, sets)
		sums := map[string]string{}
		for _, c := range []string{"server", "operator", "panel"} {
			configData(t, objs, c) // checks the checksum is the configuration's
			sums[c], _, _ = unstructured.NestedString(find(objs, "Deployment", "switchboard-"+c).Object,
				"spec", "template", "metadata", "annotations", "checksum/config")
		}
		return sums
	}
	base := checksums()
	for _, tt := range []struct {
		set     string
		changes []string
	}{
		{"server.maxConnections=100", []string{"server"}},
		{"operator.revealTTL=2h", []string{"operator"}},
		{"panel.maxSessions=5", []string{"panel"}},
		{"keyPrefix=acme", []string{"server", "operator"}},
		// Each replica sells its share of a key's credits without Redis
		// (rateLimitCredits.replicas): a new count rolls the servers onto their new share.
		{"server.replicas=5", []string{"server"}},
		{"server.podDisruptionBudget.minAvailable=2", nil},
	} {
		got := checksums(tt.set)
		for _, c := range []string{"server", "operator", "panel"} {
			if changed := got[c] != base[c]; changed != slices.Contains(tt.changes, c) {
				t.Errorf("--set %s: the %s checksum changed: %t, want %t", tt.set, c, changed, !changed)
			}
		}
	}
}
