//go:build !unit

package chart

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestMonitoringValues renders the PrometheusRule and the dashboard ConfigMap with every value
// of monitoring.* set, checks each value lands where it should, and dry-runs both against the
// Prometheus Operator's real PrometheusRule CRD (test/monitoring runs the rules themselves).
func TestMonitoringValues(t *testing.T) {
	helm := testenv.Helm(t)
	ctx := context.Background()
	for _, ns := range []string{"monitoring", "grafana"} {
		if err := env.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	installMonitoringCRDs(t)
	sets := []string{
		"metrics.serviceMonitor.enabled=true",
		"monitoring.prometheusRule.enabled=true",
		"monitoring.prometheusRule.namespace=monitoring",
		"monitoring.prometheusRule.labels.release=kube-prometheus-stack",
		"monitoring.prometheusRule.alertLabels.team=platform",
		"monitoring.prometheusRule.alertLabels.severity=page",
		`monitoring.prometheusRule.operatorSelector=job="sb-op"\,cluster="eu"`,
		`monitoring.prometheusRule.serverSelector=job="sb-api"\,cluster="eu"`,
		"monitoring.prometheusRule.expiringWithinDays=3",
		"monitoring.prometheusRule.authFailureRate=4",
		"monitoring.prometheusRule.lastUsedStalenessSeconds=1800",
		"monitoring.dashboard.enabled=true",
		"monitoring.dashboard.namespace=grafana",
		"monitoring.dashboard.labels.team=platform",
		"monitoring.dashboard.annotations.grafana_folder=Platform",
	}
	// helm's --set makes 0.5 a string: a fraction comes from a values file, as users give it.
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("monitoring:\n  prometheusRule:\n    authFailureRatio: 0.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, helm, append([]string{"template", "switchboard", chartDir(), "--namespace", releaseNamespace, "--values", values}, setArgs(sets)...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, out)
	var rule, dashboard, monitor *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() + "/" + o.GetName() {
		case "PrometheusRule/switchboard":
			rule = o
		case "ConfigMap/switchboard-dashboard":
			dashboard = o
		case "ServiceMonitor/switchboard":
			monitor = o
		}
	}
	if rule == nil || dashboard == nil || monitor == nil {
		t.Fatalf("the rendering lacks the PrometheusRule, the dashboard ConfigMap or the ServiceMonitor")
	}

	if rule.GetNamespace() != "monitoring" || rule.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule in namespace %q with labels %v", rule.GetNamespace(), rule.GetLabels())
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	alerts := 0
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			alerts++
			name, _ := r["alert"].(string)
			expr, _ := r["expr"].(string)
			labels, _, _ := unstructured.NestedStringMap(r, "labels")
			if labels["team"] != "platform" || labels["severity"] != "page" {
				t.Errorf("%s: labels %v, want alertLabels team=platform and severity=page over the rule's own", name, labels)
			}
			if strings.Contains(expr, "<<") {
				t.Errorf("%s: a placeholder is left in %s", name, expr)
			}
			if !strings.Contains(expr, `{job="sb-op",cluster="eu"`) && !strings.Contains(expr, `{job="sb-api",cluster="eu"`) {
				t.Errorf("%s: the selectors of monitoring.prometheusRule are not in %s", name, expr)
			}
			for alert, threshold := range map[string]string{
				"SwitchboardAPIKeyExpiringSoon": "< 259200", "SwitchboardAuthFailureSpike": "> 0.5",
				"SwitchboardLastUsedStale": "> 1800",
			} {
				if name == alert && !strings.Contains(expr, threshold) {
					t.Errorf("%s: the threshold %q is not in %s", name, threshold, expr)
				}
			}
			if name == "SwitchboardAuthFailureSpike" && !strings.Contains(expr, "> 4") {
				t.Errorf("%s: authFailureRate 4 is not in %s", name, expr)
			}
		}
	}
	if alerts < 10 {
		t.Errorf("the PrometheusRule has %d alerts", alerts)
	}

	if dashboard.GetNamespace() != "grafana" || dashboard.GetLabels()["grafana_dashboard"] != "1" ||
		dashboard.GetLabels()["team"] != "platform" || dashboard.GetAnnotations()["grafana_folder"] != "Platform" {
		t.Errorf("dashboard ConfigMap in %q with labels %v and annotations %v", dashboard.GetNamespace(), dashboard.GetLabels(), dashboard.GetAnnotations())
	}
	data, _, _ := unstructured.NestedString(dashboard.Object, "data", "switchboard.json")
	want, err := os.ReadFile(filepath.Join(chartDir(), "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if data != strings.TrimSpace(string(want)) {
		t.Error("the ConfigMap's switchboard.json is not files/grafana-dashboard.json")
	}
	var parsed struct {
		UID    string `json:"uid"`
		Panels []any  `json:"panels"`
	}
	if err := json.Unmarshal([]byte(data), &parsed); err != nil || parsed.UID != "switchboard" || len(parsed.Panels) == 0 {
		t.Errorf("the dashboard is not a Grafana dashboard (%v): uid %q, %d panels", err, parsed.UID, len(parsed.Panels))
	}

	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["honorLabels"] != true {
		t.Errorf("the ServiceMonitor's endpoint does not honor the key metrics' namespace label: %v", endpoints)
	}
	dryRunApply(t, []*unstructured.Unstructured{rule, dashboard, monitor})
}
