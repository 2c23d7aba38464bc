//go:build !unit

package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestHelmLeakReports: off by default (no port, Service or grant); on, the server listens on
// 9003 behind the Service switchboard-leak-reports, reads its secrets from the Secrets mounted
// where its configuration says, and may create LeakReports in the release namespace and do
// nothing else (internal/server's TestLeakReportsRBACIsCreateOnly runs the server with these
// rules) but, with an organization's webhook, hold the catch-up's Lease.
func TestHelmLeakReports(t *testing.T) {
	off := render(t, nil)
	for _, kn := range [][2]string{{"Service", "switchboard-leak-reports"}, {"Role", "switchboard-server-leak-reports"}, {"RoleBinding", "switchboard-server-leak-reports"}} {
		if find(off, kn[0], kn[1]) != nil {
			t.Errorf("by default the chart renders %s/%s", kn[0], kn[1])
		}
	}
	if c := serverConfig(t, off); c.LeakReports.Listen != "" {
		t.Errorf("by default the server listens for leak reports on %q", c.LeakReports.Listen)
	}

	on := render(t, []string{"server.leakReports.enabled=true", "server.leakReports.port=443", "server.leakReports.partner.enabled=true",
		"server.leakReports.organizationAlerts.webhookSecret.name=github-webhook", "server.leakReports.organizationAlerts.apiTokenSecret.name=github-api",
		"server.leakReports.organizationAlerts.apiTokenSecret.key=pat", "server.leakReports.organizationAlerts.apiBaseURL=https://ghe.example.com/api/v3",
		"server.leakReports.organizationAlerts.organization=acme", "server.leakReports.organizationAlerts.catchUp.maxRequests=3",
		"server.leakReports.unverifiedLimit.burst=5", "server.leakReports.replays.ttl=1h"})
	c := serverConfig(t, on).LeakReports
	a := c.OrganizationAlerts
	if c.Listen != ":9003" || !c.Partner.Enabled || c.Partner.TokenFile != "" || a.APIBaseURL != "https://ghe.example.com/api/v3" ||
		a.WebhookSecretFile != "/etc/switchboard/leak-reports/webhook-secret/secret" || a.APITokenFile != "/etc/switchboard/leak-reports/api-token/token" ||
		a.Organization != "acme" || a.CatchUp.Period.Duration != 10*time.Minute || *a.CatchUp.MaxRequests != 3 {
		t.Errorf("the server's leakReports: %+v", c)
	}
	if u, r := c.UnverifiedLimit, c.Replays; *u.Rate != 1 || *u.Burst != 5 || *u.Clients != 10000 || *r.Entries != 10000 || r.TTL.Duration != time.Hour ||
		*c.MaxBodyBytes != 256<<10 || *c.MaxBatch != 256 {
		t.Errorf("the server's leakReports bounds: %+v %+v, body %d, batch %d", u, r, *c.MaxBodyBytes, *c.MaxBatch)
	}
	svc := find(on, "Service", "switchboard-leak-reports")
	if svc == nil {
		t.Fatal("no Service switchboard-leak-reports")
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(ports) != 1 || number(t, ports[0].(map[string]any)["port"]) != 443 || ports[0].(map[string]any)["targetPort"] != "leak-reports" {
		t.Errorf("the Service's ports: %v", ports)
	}
	deploy := find(on, "Deployment", "switchboard-server")
	pod, _, _ := unstructured.NestedMap(deploy.Object, "spec", "template", "spec")
	container := pod["containers"].([]any)[0].(map[string]any)
	found := false
	for _, p := range container["ports"].([]any) {
		p := p.(map[string]any)
		found = found || (p["name"] == "leak-reports" && number(t, p["containerPort"]) == 9003)
	}
	if !found {
		t.Errorf("the server's container has no port leak-reports 9003: %v", container["ports"])
	}
	// Each secret file is its Secret's key, mounted read-only at the configuration's path.
	mounts := map[string]string{}
	for _, m := range container["volumeMounts"].([]any) {
		m := m.(map[string]any)
		if m["readOnly"] == true {
			mounts[m["name"].(string)] = m["mountPath"].(string)
		}
	}
	secrets := map[string]string{}
	for _, v := range pod["volumes"].([]any) {
		v := v.(map[string]any)
		if s, ok := v["secret"].(map[string]any); ok {
			item := s["items"].([]any)[0].(map[string]any)
			secrets[v["name"].(string)] = s["secretName"].(string) + ":" + item["key"].(string) + "→" + mounts[v["name"].(string)] + "/" + item["path"].(string)
		}
	}
	for vol, want := range map[string]string{
		"leak-reports-webhook-secret": "github-webhook:secret→" + a.WebhookSecretFile,
		"leak-reports-api-token":      "github-api:pat→" + a.APITokenFile,
	} {
		if secrets[vol] != want {
			t.Errorf("volume %s: %q, want %q", vol, secrets[vol], want)
		}
	}

	// With an organization's webhook, the catch-up's one Lease too (internal/server's
	// TestLeakCatchUpRecordsAMissedAlert runs the server with these rules).
	role := rolesOf(t, on, "Role")["switchboard-server-leak-reports"]
	create := rbacv1.PolicyRule{APIGroups: []string{"switchboard.dev"}, Resources: []string{"leakreports"}, Verbs: []string{"create"}}
	want := []rbacv1.PolicyRule{create,
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{leakreceiver.CatchUpLease}, Verbs: []string{"get", "update"}},
	}
	if role == nil || !reflect.DeepEqual(role.Rules, want) {
		t.Fatalf("the server's leak reports Role: %+v, want only %+v", role, want)
	}
	partnerOnly := render(t, []string{"server.leakReports.enabled=true", "server.leakReports.partner.enabled=true"})
	if role := rolesOf(t, partnerOnly, "Role")["switchboard-server-leak-reports"]; role == nil || !reflect.DeepEqual(role.Rules, want[:1]) {
		t.Errorf("the server's leak reports Role for the partner program alone: %+v, want only %+v", role, want[:1])
	}
	// config/rbac ships the same Role, for kustomize installs that turn the listener on.
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "server_leak_reports_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if shipped := rolesOf(t, decode(t, string(raw)), "Role")["switchboard-server-leak-reports"]; shipped == nil || !reflect.DeepEqual(shipped.Rules, want) {
		t.Errorf("config/rbac/server_leak_reports_role.yaml grants %+v, want only %+v", shipped, want)
	}
	if ns := find(on, "Role", "switchboard-server-leak-reports").GetNamespace(); ns != releaseNamespace {
		t.Errorf("the leak reports Role is in %q, not the release namespace", ns)
	}
	binding := &rbacv1.RoleBinding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(on, "RoleBinding", "switchboard-server-leak-reports").Object, binding); err != nil {
		t.Fatal(err)
	}
	if binding.RoleRef.Name != "switchboard-server-leak-reports" || len(binding.Subjects) != 1 || binding.Subjects[0].Name != "switchboard-server" {
		t.Errorf("the leak reports RoleBinding: %+v", binding)
	}
}
