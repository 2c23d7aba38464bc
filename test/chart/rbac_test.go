//go:build !unit

package chart

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/version"
)

// renderings returns the objects of the chart (default values) and of config/default.
func renderings(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	chart, err := run(t, testenv.Helm(t), "template", "switchboard", chartDir(), "--namespace", releaseNamespace)
	if err != nil {
		t.Fatal(err)
	}
	kustomized, err := run(t, filepath.Join(testenv.AssetsDir(), "kubectl"), "kustomize", filepath.Join(testenv.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]*unstructured.Unstructured{"chart": decode(t, chart), "config/default": decode(t, kustomized)}
}

// rolesOf returns the rules of every ClusterRole (kind "ClusterRole") or Role, by name.
func rolesOf(t *testing.T, objs []*unstructured.Unstructured, kind string) map[string]*rbacv1.ClusterRole {
	t.Helper()
	out := map[string]*rbacv1.ClusterRole{}
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		role := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role); err != nil {
			t.Fatal(err)
		}
		out[o.GetName()] = role
	}
	return out
}

// TestTenantRolesAreAggregatedAndStatusFree: the chart and config/rbac ship the same tenant
// roles, aggregated into view/edit/admin as cert-manager's are, and neither grants a status.
func TestTenantRolesAreAggregatedAndStatusFree(t *testing.T) {
	wantLabels := map[string][]string{
		"switchboard-view": {"rbac.authorization.k8s.io/aggregate-to-view", "rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"},
		"switchboard-edit": {"rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"},
	}
	rules := map[string]map[string][]rbacv1.PolicyRule{}
	for source, objs := range renderings(t) {
		roles := rolesOf(t, objs, "ClusterRole")
		for name, labels := range wantLabels {
			role, ok := roles[name]
			if !ok {
				t.Fatalf("%s has no ClusterRole %s", source, name)
			}
			for _, l := range labels {
				if role.Labels[l] != "true" {
					t.Errorf("%s: %s is not labelled %s", source, name, l)
				}
			}
			for _, r := range role.Rules {
				for _, res := range r.Resources {
					if res == "apikeys/status" || res == "connections/status" || res == "*" || slices.Contains(r.Verbs, "*") {
						t.Errorf("%s: tenant role %s grants %v on %s", source, name, r.Verbs, res)
					}
				}
			}
			if rules[name] == nil {
				rules[name] = map[string][]rbacv1.PolicyRule{}
			}
			rules[name][source] = role.Rules
		}
	}
	for name, bySource := range rules {
		if !reflect.DeepEqual(bySource["chart"], bySource["config/default"]) {
			t.Errorf("%s differs: chart %v, config/default %v", name, bySource["chart"], bySource["config/default"])
		}
	}
}

// TestOperatorRBACIsMinimal: the operator may do with Secrets exactly what its code does (no
// update, no deletecollection) and holds Leases only in its own namespace, through a Role.
func TestOperatorRBACIsMinimal(t *testing.T) {
	wantSecretVerbs := []string{"create", "delete", "get", "list", "patch", "watch"}
	for source, objs := range renderings(t) {
		operator := rolesOf(t, objs, "ClusterRole")["switchboard-operator"]
		if operator == nil {
			t.Fatalf("%s has no ClusterRole switchboard-operator", source)
		}
		var secretVerbs []string
		for _, r := range operator.Rules {
			if slices.Contains(r.Resources, "secrets") {
				secretVerbs = append(secretVerbs, r.Verbs...)
			}
			if slices.Contains(r.Resources, "leases") {
				t.Errorf("%s: the operator's ClusterRole grants Leases in every namespace", source)
			}
		}
		slices.Sort(secretVerbs)
		if !slices.Equal(secretVerbs, wantSecretVerbs) {
			t.Errorf("%s: the operator's Secret verbs are %v, want %v", source, secretVerbs, wantSecretVerbs)
		}
		leases := false
		for name, role := range rolesOf(t, objs, "Role") {
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "leases") {
					leases = true
				}
				if slices.Contains(r.Resources, "secrets") && name != "switchboard-server" && name != "switchboard-webhooks-signing" {
					t.Errorf("%s: Role %s grants Secrets the ClusterRole already covers", source, name)
				}
			}
		}
		if !leases {
			t.Errorf("%s: no Role grants the operator its leader-election Lease", source)
		}
	}
}

// grants flattens RBAC rules into sorted "group resource verb" lines.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if len(r.ResourceNames) > 0 {
						v += " " + strings.Join(r.ResourceNames, ",")
					}
					out = append(out, g+" "+res+" "+v)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestOperatorGrantsOnlyWhatItsCodeUses: the chart and config/rbac give the operator the same
// permissions, each one a call its code (or controller-runtime's leader election) makes: no
// update of APIKeys or statuses (it patches), no Lease list, watch, patch or delete (client-go's
// elector gets, creates and updates), core Events only beside its Lease (the elector's), and
// events.k8s.io Events everywhere (the reconciler's, on APIKeys in tenant namespaces), its
// one webhook configuration by name (its caBundle), its version ConfigMap by name, and
// LeakReports only in its own namespace (read, their status, and their deletion).
func TestOperatorGrantsOnlyWhatItsCodeUses(t *testing.T) {
	wantCluster := grants([]rbacv1.PolicyRule{
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"connections"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys/status", "connections/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"keywebhooks"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"keywebhooks/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeyhistories"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"},
			ResourceNames: []string{"switchboard-apikey-windows"}, Verbs: []string{"get", "update"}},
	})
	wantElection := grants([]rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{version.ConfigMap}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"leakreports"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"leakreports/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"webhookoutboxes"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeyhistories"}, Verbs: []string{"delete"}},
	})
	for source, objs := range renderings(t) {
		if got := grants(rolesOf(t, objs, "ClusterRole")["switchboard-operator"].Rules); !slices.Equal(got, wantCluster) {
			t.Errorf("%s: the operator's ClusterRole grants\n%s\nwant\n%s", source, strings.Join(got, "\n"), strings.Join(wantCluster, "\n"))
		}
		found := false
		for name, role := range rolesOf(t, objs, "Role") {
			got := grants(role.Rules)
			if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, "coordination.k8s.io leases ") }) ||
				name == "switchboard-webhooks" { // the sender's own (TestWebhookSenderGrantsOnlyWhatItsCodeUses)
				continue
			}
			found = true
			if !slices.Equal(got, wantElection) {
				t.Errorf("%s: Role %s grants\n%s\nwant\n%s", source, name, strings.Join(got, "\n"), strings.Join(wantElection, "\n"))
			}
		}
		if !found {
			t.Errorf("%s: no Role grants the leader-election Lease", source)
		}
	}
}

// TestRolloutRoleIsShippedUnbound: the chart and config/rbac ship the ClusterRole a tenant
// binds in its namespace to have its workloads rolled when a key they read leaks (get, list and
// patch of Deployments, StatefulSets and DaemonSets, nothing else), and nothing binds it:
// switchboard holds no right on workloads until a tenant grants one in its namespace.
func TestRolloutRoleIsShippedUnbound(t *testing.T) {
	want := grants([]rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "patch"}},
	})
	for source, objs := range renderings(t) {
		role := rolesOf(t, objs, "ClusterRole")["switchboard-rollout"]
		if role == nil {
			t.Fatalf("%s has no ClusterRole switchboard-rollout", source)
		}
		if got := grants(role.Rules); !slices.Equal(got, want) {
			t.Errorf("%s: switchboard-rollout grants\n%s\nwant\n%s", source, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, o := range objs {
			if kind := o.GetKind(); kind != "RoleBinding" && kind != "ClusterRoleBinding" {
				continue
			}
			if name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); name == "switchboard-rollout" {
				t.Errorf("%s: %s %s binds switchboard-rollout; only a tenant may", source, o.GetKind(), o.GetName())
			}
		}
		for name, r := range rolesOf(t, objs, "ClusterRole") {
			for _, g := range grants(r.Rules) {
				if name != "switchboard-rollout" && strings.HasPrefix(g, "apps ") && strings.Contains(name, "operator") {
					t.Errorf("%s: ClusterRole %s grants %q: the operator gets workloads only from tenants", source, name, g)
				}
			}
		}
	}
	for _, o := range render(t, []string{"operator.rolloutClusterRole.enabled=false"}) {
		if o.GetKind() == "ClusterRole" && o.GetName() == "switchboard-rollout" {
			t.Error("operator.rolloutClusterRole.enabled=false still renders switchboard-rollout")
		}
	}
}

// TestPanelIdentityOnlyReviewsTokens: in both renderings the panel runs apart from the /v1
// server, under an identity that may only create TokenReviews, and the server's identity no
// longer may.
func TestPanelIdentityOnlyReviewsTokens(t *testing.T) {
	tokenReviews := rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}
	for source, objs := range renderings(t) {
		roles := rolesOf(t, objs, "ClusterRole")
		panel := roles["switchboard-panel"]
		if panel == nil {
			t.Fatalf("%s has no ClusterRole switchboard-panel", source)
		}
		if !reflect.DeepEqual(panel.Rules, []rbacv1.PolicyRule{tokenReviews}) {
			t.Errorf("%s: the panel's ClusterRole grants %v, want only %v", source, panel.Rules, tokenReviews)
		}
		for _, r := range roles["switchboard-server"].Rules {
			if slices.Contains(r.Resources, "tokenreviews") {
				t.Errorf("%s: the server's ClusterRole still grants tokenreviews", source)
			}
		}
		var panelDeployments int
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
				if len(args) > 0 && args[0] == "panel" {
					panelDeployments++
					if sa != "switchboard-panel" {
						t.Errorf("%s: %s runs the panel as %q, want switchboard-panel", source, o.GetName(), sa)
					}
				}
				if len(args) > 0 && args[0] == "server" && source == "chart" && serverConfig(t, objs).Panel != nil {
					t.Errorf("%s: %s still serves the panel beside /v1", source, o.GetName())
				}
				for _, a := range args {
					if strings.HasPrefix(a, "--panel-listen") {
						t.Errorf("%s: %s still serves the panel beside /v1 (%s)", source, o.GetName(), a)
					}
				}
			}
		}
		if panelDeployments != 1 {
			t.Errorf("%s: %d Deployments run `switchboard panel`, want 1", source, panelDeployments)
		}
	}
}

// admissionPolicy returns the ValidatingAdmissionPolicy called name in objs, its validations'
// expressions (joined, for comparing renderings), and fails the test unless a binding binds it
// and it fails closed.
func admissionPolicy(t *testing.T, source string, objs []*unstructured.Unstructured, name string) (policy *unstructured.Unstructured, validation string) {
	t.Helper()
	bound := false
	for _, o := range objs {
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy":
			if o.GetName() == name {
				policy = o
			}
		case "ValidatingAdmissionPolicyBinding":
			if n, _, _ := unstructured.NestedString(o.Object, "spec", "policyName"); n == name {
				bound = true
			}
		}
	}
	if policy == nil || !bound {
		t.Fatalf("%s: policy %s shipped %t, bound %t", source, name, policy != nil, bound)
	}
	if fp, _, _ := unstructured.NestedString(policy.Object, "spec", "failurePolicy"); fp != "Fail" {
		t.Errorf("%s: %s has failurePolicy %q, want Fail", source, name, fp)
	}
	vals, _, _ := unstructured.NestedSlice(policy.Object, "spec", "validations")
	if len(vals) == 0 {
		t.Fatalf("%s: %s has no validations", source, name)
	}
	var exprs []string
	for _, v := range vals {
		exprs = append(exprs, v.(map[string]any)["expression"].(string))
	}
	return policy, strings.Join(exprs, "\n---\n")
}

// TestServerStatusPolicyShipped: both renderings ship the admission policy that keeps the API
// server's status writes to lastUsedAt, bound, failing closed, with the same validation, and
// naming the very ServiceAccount the server's Deployment runs as (a policy naming another would
// restrict nobody). controllers' TestServerCannotRevokeOrMoveTheReveal shows what it refuses.
func TestServerStatusPolicyShipped(t *testing.T) {
	validations := map[string]string{}
	for source, objs := range renderings(t) {
		policy, validation := admissionPolicy(t, source, objs, "switchboard-server-status")
		validations[source] = validation
		serverSA := ""
		for _, o := range objs {
			if o.GetKind() == "Deployment" && o.GetName() == "switchboard-server" {
				serverSA, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			}
		}
		conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
		// The tests render the chart into switchboard-system, config/default's namespace.
		want := "request.userInfo.username == 'system:serviceaccount:" + releaseNamespace + ":" + serverSA + "'"
		if serverSA == "" || len(conds) != 1 || conds[0].(map[string]any)["expression"] != want {
			t.Errorf("%s: match conditions %v, want the one %q", source, conds, want)
		}
	}
	if validations["chart"] != validations["config/default"] {
		t.Errorf("the chart and config/default validate differently:\n%s\n---\n%s", validations["chart"], validations["config/default"])
	}
}

// TestOperatorSpecPolicyShipped: both renderings ship the admission policy that refuses any
// change of an APIKey's or a Connection's spec by the operator, bound, failing closed, with the
// same validation, naming the very ServiceAccount the operator's Deployment runs as; the chart's
// operator.specPolicy.enabled=false leaves it out. controllers' suite runs the operator under
// that policy (every test there fails if a code path writes a spec).
func TestOperatorSpecPolicyShipped(t *testing.T) {
	validations := map[string]string{}
	for source, objs := range renderings(t) {
		policy, validation := admissionPolicy(t, source, objs, "switchboard-operator-spec")
		validations[source] = validation
		operatorSA := ""
		for _, o := range objs {
			if o.GetKind() == "Deployment" && o.GetName() == "switchboard-operator" {
				operatorSA, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			}
		}
		conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
		want := "request.userInfo.username == 'system:serviceaccount:" + releaseNamespace + ":" + operatorSA + "'"
		if operatorSA == "" || len(conds) != 1 || conds[0].(map[string]any)["expression"] != want {
			t.Errorf("%s: match conditions %v, want the one %q", source, conds, want)
		}
		rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConstraints", "resourceRules")
		if len(rules) != 1 {
			t.Fatalf("%s: %d resource rules", source, len(rules))
		}
		resources, _, _ := unstructured.NestedStringSlice(rules[0].(map[string]any), "resources")
		if !slices.Equal(resources, []string{"apikeys", "connections"}) {
			t.Errorf("%s: the policy covers %v", source, resources)
		}
	}
	if validations["chart"] != validations["config/default"] {
		t.Errorf("the chart and config/default validate differently:\n%s\n---\n%s", validations["chart"], validations["config/default"])
	}
	for _, o := range render(t, []string{"operator.specPolicy.enabled=false"}) {
		if strings.HasSuffix(o.GetName(), "-operator-spec") {
			t.Errorf("operator.specPolicy.enabled=false still renders %s %s", o.GetKind(), o.GetName())
		}
	}
}

// TestTenantMetadataPolicyShipped: both renderings ship the admission policy that bounds the
// labels of Connections and APIKeys, bound, failing closed, with the same validation, for both
// kinds. controllers' TestTenantLabelsAreBounded shows what it refuses.
func TestTenantMetadataPolicyShipped(t *testing.T) {
	validations := map[string]string{}
	for source, objs := range renderings(t) {
		policy, validation := admissionPolicy(t, source, objs, "switchboard-tenant-metadata")
		validations[source] = validation
		rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConstraints", "resourceRules")
		if len(rules) != 1 {
			t.Fatalf("%s: %d resource rules", source, len(rules))
		}
		resources, _, _ := unstructured.NestedStringSlice(rules[0].(map[string]any), "resources")
		if !slices.Equal(resources, []string{"connections", "apikeys"}) {
			t.Errorf("%s: the policy covers %v", source, resources)
		}
	}
	if validations["chart"] != validations["config/default"] {
		t.Errorf("the chart and config/default validate differently:\n%s\n---\n%s", validations["chart"], validations["config/default"])
	}
}

// TestPanelImpersonationRoleIsTheCodes: in impersonate mode the chart grants the panel's
// ServiceAccount exactly internal/panel.ImpersonationRules (which the panel's tests prove
// limited against a real kube-apiserver), and otherwise no impersonation at all.
func TestPanelImpersonationRoleIsTheCodes(t *testing.T) {
	var want []rbacv1.PolicyRule
	for _, r := range panel.ImpersonationRules {
		want = append(want, rbacv1.PolicyRule{APIGroups: []string{r.Group}, Resources: r.Resources, Verbs: r.Verbs})
	}
	for _, mode := range []string{"", "token", "impersonate"} {
		var sets []string
		if mode != "" {
			sets = ssoValues(mode)
		}
		objs := decode(t, mustRun(t, append([]string{"template", "switchboard", chartDir(), "--namespace", releaseNamespace}, setArgs(sets)...)...))
		roles := rolesOf(t, objs, "ClusterRole")
		for name, role := range roles {
			for _, r := range role.Rules {
				for _, v := range r.Verbs {
					if v == "impersonate" || (v == "*" && strings.Contains(name, "panel")) {
						t.Errorf("mode %q: ClusterRole %s grants %q", mode, name, v)
					}
				}
			}
		}
		got := roles["switchboard-panel-impersonate"]
		if mode != "impersonate" {
			if got != nil {
				t.Errorf("mode %q renders the impersonation ClusterRole", mode)
			}
			continue
		}
		if got == nil || !reflect.DeepEqual(got.Rules, want) {
			t.Fatalf("the chart's impersonation grant differs from panel.ImpersonationRules:\n got %v\nwant %v", got, want)
		}
		var bound bool
		for _, o := range objs {
			if o.GetKind() == "ClusterRoleBinding" && o.GetName() == "switchboard-panel-impersonate" {
				b := &rbacv1.ClusterRoleBinding{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, b); err != nil {
					t.Fatal(err)
				}
				bound = b.RoleRef.Name == "switchboard-panel-impersonate" && len(b.Subjects) == 1 &&
					b.Subjects[0].Kind == "ServiceAccount" && b.Subjects[0].Name == "switchboard-panel"
			}
		}
		if !bound {
			t.Error("the impersonation ClusterRole is not bound to the panel's ServiceAccount alone")
		}
	}
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, testenv.Helm(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWebhookSenderGrantsOnlyWhatItsCodeUses: the chart and config/rbac give the webhook sender,
// the one component with egress to the internet, the same permissions, each one a call its
// code makes: KeyWebhooks read and their status patched cluster-wide; in the system namespace
// its outboxes (read and updated), its Lease and the elector's Events, and no Secret; Secrets
// read in the signing namespace alone, where the operator's copies of the signing secrets are
// and nothing else. No other Secret, no tenant object written.
func TestWebhookSenderGrantsOnlyWhatItsCodeUses(t *testing.T) {
	wantCluster := grants([]rbacv1.PolicyRule{
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"keywebhooks"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"keywebhooks/status"}, Verbs: []string{"patch"}},
	})
	wantSystem := grants([]rbacv1.PolicyRule{
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"webhookoutboxes"}, Verbs: []string{"get", "list", "watch", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	})
	wantSigning := grants([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
	})
	for source, objs := range renderings(t) {
		cluster := rolesOf(t, objs, "ClusterRole")["switchboard-webhooks"]
		system := rolesOf(t, objs, "Role")["switchboard-webhooks"]
		signing := rolesOf(t, objs, "Role")["switchboard-webhooks-signing"]
		if cluster == nil || system == nil || signing == nil {
			t.Fatalf("%s has no ClusterRole switchboard-webhooks, Role switchboard-webhooks and Role switchboard-webhooks-signing", source)
		}
		if got := grants(cluster.Rules); !slices.Equal(got, wantCluster) {
			t.Errorf("%s: the sender's ClusterRole grants\n%s\nwant\n%s", source, strings.Join(got, "\n"), strings.Join(wantCluster, "\n"))
		}
		if got := grants(system.Rules); !slices.Equal(got, wantSystem) || system.Namespace != releaseNamespace {
			t.Errorf("%s: the sender's Role in %s grants\n%s\nwant, in %s\n%s", source, system.Namespace, strings.Join(got, "\n"), releaseNamespace, strings.Join(wantSystem, "\n"))
		}
		if got := grants(signing.Rules); !slices.Equal(got, wantSigning) || signing.Namespace != signingNamespace {
			t.Errorf("%s: the sender's Role in %s grants\n%s\nwant, in %s\n%s", source, signing.Namespace, strings.Join(got, "\n"), signingNamespace, strings.Join(wantSigning, "\n"))
		}
		for _, o := range objs {
			if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
				continue
			}
			b := &rbacv1.RoleBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, b); err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Subjects {
				if s.Name != "switchboard-webhooks" {
					continue
				}
				switch b.RoleRef.Name {
				case "switchboard-webhooks", "switchboard-metrics-auth":
				case "switchboard-webhooks-signing":
					if b.Namespace != signingNamespace {
						t.Errorf("%s: %s %s binds the sender's Secret grant in %q, not the signing namespace %s", source, o.GetKind(), o.GetName(), b.Namespace, signingNamespace)
					}
				default:
					t.Errorf("%s: %s %s binds the sender to %s", source, o.GetKind(), o.GetName(), b.RoleRef.Name)
				}
			}
		}
		if ns := find(objs, "Namespace", signingNamespace); ns == nil {
			t.Errorf("%s makes no namespace %s for the signing secrets' copies", source, signingNamespace)
		}
	}
}

// TestWebhookSigningNamespace: the chart's signing namespace is the one its operator and sender
// are configured with and the sender's Secret Role is in: "<release namespace>-webhook-signing"
// by default, made by the chart and kept on uninstall; another when named, not made when
// create is false, and never the release namespace or a name too long for one.
func TestWebhookSigningNamespace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sets   []string
		want   string
		create bool
	}{
		{"default", nil, signingNamespace, true},
		{"named", []string{"webhooks.signingNamespace.name=hook-copies"}, "hook-copies", true},
		{"made by the platform", []string{"webhooks.signingNamespace.create=false"}, signingNamespace, false},
		{"the sender off", []string{"webhooks.enabled=false"}, signingNamespace, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.sets)
			if got := operatorConfig(t, objs).Webhooks.SigningNamespace; got != tc.want {
				t.Errorf("the operator's (and sender's) webhooks.signingNamespace is %q, want %q", got, tc.want)
			}
			ns := find(objs, "Namespace", tc.want)
			switch {
			case tc.create && ns == nil:
				t.Errorf("no Namespace %s", tc.want)
			case !tc.create && ns != nil:
				t.Errorf("Namespace %s rendered with signingNamespace.create=false", tc.want)
			case tc.create && ns.GetAnnotations()["helm.sh/resource-policy"] != "keep":
				t.Errorf("Namespace %s is not kept on uninstall: annotations %v", tc.want, ns.GetAnnotations())
			}
			role := rolesOf(t, objs, "Role")["switchboard-webhooks-signing"]
			if slices.Contains(tc.sets, "webhooks.enabled=false") {
				if role != nil {
					t.Error("the sender's Role is rendered with webhooks.enabled=false")
				}
				return
			}
			if role == nil || role.Namespace != tc.want {
				t.Fatalf("the sender's Secret Role is not in %s: %v", tc.want, role)
			}
		})
	}
	for _, set := range []string{"webhooks.signingNamespace.name=" + releaseNamespace, "webhooks.signingNamespace.name=" + strings.Repeat("n", 64)} {
		if out, err := run(t, testenv.Helm(t), "template", "switchboard", chartDir(), "--namespace", releaseNamespace, "--set", set); err == nil {
			t.Errorf("helm template accepted %s:\n%.300s", set, out)
		}
	}
	long := strings.Repeat("r", 50)
	if _, err := run(t, testenv.Helm(t), "template", "switchboard", chartDir(), "--namespace", long); err == nil ||
		!strings.Contains(err.Error(), "longer than a namespace's 63 characters") {
		t.Errorf("a release namespace too long for the default signing namespace: %v", err)
	}
}

// TestServerGrantsWhatBindingNeeds: the chart and config/rbac alike let the API server read
// what its own objects are and what keys bound to workloads need by default
// (binding.serviceAccountTokens): pods' metadata, listed and watched, and the cluster's issuer
// discovery, without which the server never becomes ready (a kustomize install once lacked them).
func TestServerGrantsWhatBindingNeeds(t *testing.T) {
	want := []string{
		" pods list", " pods watch",
		"switchboard.dev apikeycreditpools list", "switchboard.dev apikeyroles watch", "switchboard.dev apikeys/status patch",
	}
	for source, objs := range renderings(t) {
		role := rolesOf(t, objs, "ClusterRole")["switchboard-server"]
		if role == nil {
			t.Errorf("%s: no ClusterRole switchboard-server", source)
			continue
		}
		got := grants(role.Rules)
		for _, g := range want {
			if !slices.Contains(got, g) {
				t.Errorf("%s: the server's ClusterRole lacks %q: it grants\n%s", source, g, strings.Join(got, "\n"))
			}
		}
		var urls []string
		for _, r := range role.Rules {
			if slices.Contains(r.Verbs, "get") {
				urls = append(urls, r.NonResourceURLs...)
			}
		}
		for _, u := range []string{"/.well-known/openid-configuration", "/openid/v1/jwks"} {
			if !slices.Contains(urls, u) {
				t.Errorf("%s: the server's ClusterRole does not let it get %s (has %v)", source, u, urls)
			}
		}
	}
}
