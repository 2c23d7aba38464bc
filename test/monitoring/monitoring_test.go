//go:build !unit

// Package monitoring tests the chart's alerting rules and Grafana dashboard
// (charts/switchboard/files): the rules as the chart renders them pass `promtool check rules`
// and the promtool unit tests of testdata/rules_test.yaml, where every alert both fires and does
// not; and every expression of the rules and the dashboard parses, with Prometheus's own parser,
// and names only metrics that a live scrape of the operator and the server exposes.
package monitoring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// The chart renders the rules for this release, whose jobs testdata/rules_test.yaml names.
const (
	release          = "switchboard"
	releaseNamespace = "switchboard-system"
)

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "switchboard") }

// tool is a binary of bin/ that the Makefile builds: $env, else bin/<name>.
func tool(t *testing.T, env, name, target string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		bin = filepath.Join(testenv.RepoRoot(), "bin", name)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing at %s: run `make %s` to build it (%v)", name, bin, target, err)
	}
	return bin
}

func promtool(t *testing.T) string { return tool(t, "PROMTOOL", "promtool-v0.316.0", "promtool") }

func promqlMetrics(t *testing.T) string {
	return tool(t, "PROMQL_METRICS", "promql-metrics-v0.316.0", "promtool")
}

// run runs a command in dir with stdin, and returns its standard output, or an error that
// carries both outputs.
func run(dir string, stdin io.Reader, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdin = dir, stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// ruleFile is a Prometheus rule file: the spec of the chart's PrometheusRule.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert"`
			Record string `json:"record"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// renderRules renders the chart's PrometheusRule with the default values and returns its spec,
// as a rule file's YAML and parsed.
func renderRules(t *testing.T) ([]byte, ruleFile) {
	t.Helper()
	out, err := run(testenv.RepoRoot(), nil, testenv.Helm(t), "template", release, chartDir(), "--namespace", releaseNamespace,
		"--set", "monitoring.prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out), &rule); err != nil || rule.Kind != "PrometheusRule" {
		t.Fatalf("the rendering is not a PrometheusRule (%v):\n%s", err, out)
	}
	raw, err := yaml.JSONToYAML(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	if err := json.Unmarshal(rule.Spec, &rules); err != nil {
		t.Fatal(err)
	}
	if len(rules.Groups) == 0 {
		t.Fatal("the PrometheusRule has no rule groups")
	}
	return raw, rules
}

// TestRulesCheck: `promtool check rules` (syntax, PromQL, templates, duplicates) on the rendering.
func TestRulesCheck(t *testing.T) {
	raw, _ := renderRules(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "switchboard-rules.yaml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(dir, nil, promtool(t), "check", "rules", "--lint=all", "--lint-fatal", "switchboard-rules.yaml"); err != nil {
		t.Fatalf("promtool check rules failed:\n%v", err)
	} else {
		t.Log(strings.TrimSpace(out))
	}
}

// unitTests is the part of a promtool test file this test reads.
type unitTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			EvalTime  string            `json:"eval_time"`
			Alertname string            `json:"alertname"`
			ExpAlerts []json.RawMessage `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestRulesUnit runs `promtool test rules` on testdata/rules_test.yaml against the rendered
// rules, after checking that the file has, for every alert of the rules, a case where it fires
// and one where it does not.
func TestRulesUnit(t *testing.T) {
	raw, rules := renderRules(t)
	testFile, err := os.ReadFile(filepath.Join("testdata", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests unitTests
	if err := yaml.Unmarshal(testFile, &tests); err != nil {
		t.Fatal(err)
	}
	if len(tests.RuleFiles) != 1 || tests.RuleFiles[0] != "switchboard-rules.yaml" {
		t.Fatalf("testdata/rules_test.yaml's rule_files is %v, want [switchboard-rules.yaml] (the rendering)", tests.RuleFiles)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tt := range tests.Tests {
		for _, c := range tt.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname] = true
			} else {
				silent[c.Alertname] = true
			}
		}
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if !fires[r.Alert] {
				t.Errorf("testdata/rules_test.yaml has no case where %s fires", r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("testdata/rules_test.yaml has no case where %s does not fire", r.Alert)
			}
			delete(fires, r.Alert)
			delete(silent, r.Alert)
		}
	}
	for name := range fires {
		t.Errorf("testdata/rules_test.yaml tests %s, which the rules do not have", name)
	}
	for name := range silent {
		t.Errorf("testdata/rules_test.yaml tests %s, which the rules do not have", name)
	}
	if alerts == 0 {
		t.Fatal("the rules have no alert")
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "switchboard-rules.yaml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), testFile, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(dir, nil, promtool(t), "test", "rules", "rules_test.yaml")
	if err != nil {
		t.Fatalf("promtool test rules failed:\n%v", err)
	}
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules did not report SUCCESS:\n%s", out)
	}
	t.Logf("promtool test rules: %d alerts, each firing and not firing:\n%s", alerts, strings.TrimSpace(out))
}

// expression is a PromQL expression of the rules or the dashboard, with where it comes from.
type expression struct {
	where, expr string
}

// ruleExpressions are the expressions of every rule.
func ruleExpressions(rules ruleFile) []expression {
	var exprs []expression
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, expression{where: "rule " + r.Alert + r.Record, expr: r.Expr})
		}
	}
	return exprs
}

// dashboardExpressions are the expressions of every panel's targets (rows' nested panels
// included) and every query variable of files/grafana-dashboard.json, with Grafana's variables
// replaced as Grafana does before it sends a query: intervals by a duration, the others (which
// only stand in label matchers' values) by ".*".
func dashboardExpressions(t *testing.T) []expression {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(), "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dashboard struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("files/grafana-dashboard.json: %v", err)
	}
	var exprs []expression
	var walk func([]json.RawMessage)
	walk = func(panels []json.RawMessage) {
		for _, r := range panels {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("files/grafana-dashboard.json: a panel: %v", err)
			}
			for _, target := range p.Targets {
				exprs = append(exprs, expression{where: "panel " + p.Title, expr: grafanaExpr(target.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(dashboard.Panels)
	for _, v := range dashboard.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("files/grafana-dashboard.json: variable %s: %v", v.Name, err)
		}
		// label_values(EXPR, LABEL) is Grafana's, around a PromQL selector.
		inner, ok := strings.CutPrefix(q.Query, "label_values(")
		comma := strings.LastIndex(inner, ",")
		if !ok || comma < 0 || !strings.HasSuffix(inner, ")") {
			t.Fatalf("files/grafana-dashboard.json: variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, q.Query)
		}
		exprs = append(exprs, expression{where: "variable " + v.Name, expr: grafanaExpr(inner[:comma])})
	}
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no query")
	}
	return exprs
}

// grafanaExpr replaces Grafana's variables in expr.
func grafanaExpr(expr string) string {
	for _, v := range []string{"$__rate_interval", "$__interval", "$__range"} {
		expr = strings.ReplaceAll(expr, v, "5m")
	}
	for _, v := range []string{"${namespace}", "$namespace", "${key_namespace}", "$key_namespace"} {
		expr = strings.ReplaceAll(expr, v, ".*")
	}
	return expr
}

// metricNames parses each expression with Prometheus's parser (bin/promql-metrics) and returns
// the metric names each selects; a parse error fails the test.
func metricNames(t *testing.T, exprs []expression) [][]string {
	t.Helper()
	in := make([]string, len(exprs))
	for i, e := range exprs {
		in[i] = e.expr
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(testenv.RepoRoot(), bytes.NewReader(stdin), promqlMetrics(t))
	if err != nil {
		t.Fatal(err)
	}
	var results []struct {
		Metrics []string `json:"metrics"`
		Error   string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &results); err != nil || len(results) != len(exprs) {
		t.Fatalf("promql-metrics answered %d results for %d expressions (%v):\n%s", len(results), len(exprs), err, out)
	}
	names := make([][]string, len(exprs))
	for i, r := range results {
		if r.Error != "" {
			t.Errorf("%s: %s does not parse: %s", exprs[i].where, exprs[i].expr, r.Error)
			continue
		}
		if len(r.Metrics) == 0 && !strings.Contains(exprs[i].expr, "vector(") {
			t.Errorf("%s: %s names no metric", exprs[i].where, exprs[i].expr)
		}
		names[i] = r.Metrics
	}
	return names
}

// TestExpressionsParse: every expression of the rules and the dashboard parses and names at
// least one metric. (TestExpressionsNameExposedMetrics checks the names.)
func TestExpressionsParse(t *testing.T) {
	_, rules := renderRules(t)
	exprs := append(ruleExpressions(rules), dashboardExpressions(t)...)
	names := metricNames(t, exprs)
	seen := map[string]bool{}
	for _, n := range names {
		for _, name := range n {
			seen[name] = true
		}
	}
	t.Logf("%d expressions parsed, naming %d metrics", len(exprs), len(seen))
}
