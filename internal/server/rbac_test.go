//go:build !unit

package server

import (
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
)

// TestLeastPrivilege runs the server as a ServiceAccount holding only the permissions the Helm
// chart grants it (charts/switchboard/templates/server-rbac.yaml): read Connections and APIKeys
// everywhere, patch APIKey status, read Secrets in the system namespace. It must sync, serve and
// write lastUsedAt with nothing more.
func TestLeastPrivilege(t *testing.T) {
	ns := env.Namespace(t, "least")
	cfg := serviceAccountConfig(t, true)

	newConnection(t, ns, "one", "conn_least1", nil)
	k := newKey(t, ns, "minimal", switchboardv1alpha1.APIKeySpec{})
	s := startServer(t, cfg, nil, Deps{LastUsedFlush: 20 * time.Millisecond}, true)
	if got := ids(s.get(t, "/v1/connections", k.Key).connections(t)); len(got) != 1 || got[0] != "conn_least1" {
		t.Fatalf("listed %v", got)
	}
	if resp := s.get(t, "/v1/connections", "sb_live_x"); resp.Status != http.StatusUnauthorized {
		t.Errorf("an unknown key: %d", resp.Status)
	}
	var ak switchboardv1alpha1.APIKey
	eventually(t, "lastUsedAt written with the chart's permissions", func() bool {
		if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(k.APIKey), &ak); err != nil {
			t.Fatal(err)
		}
		return ak.Status.LastUsedAt != nil
	})
}

// TestRunStopsWithoutSync: a server whose cache cannot sync (here, no right to read the hash
// Secrets: a broken install) answers 503 and still stops when told to, well within a Pod's
// termination grace period.
func TestRunStopsWithoutSync(t *testing.T) {
	s := startServer(t, serviceAccountConfig(t, false), nil, Deps{}, false)
	time.Sleep(2 * time.Second)
	if resp := s.get(t, "/v1/connections", "sb_live_x"); resp.Status != http.StatusServiceUnavailable {
		t.Fatalf("a server whose cache cannot sync answered %d, want 503", resp.Status)
	}
	start := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("stopping a server whose cache never synced: %v", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("a server whose cache never synced took %v to stop", took.Round(time.Millisecond))
	}
}

// grant is a Role of the chart's in the system namespace, granted when a feature is on.
type grant struct {
	name  string
	rules []rbacv1.PolicyRule
}

// withLeakReports is the chart's grant with server.leakReports enabled
// (charts/switchboard/templates/server-rbac.yaml; test/chart checks the chart renders it so).
var withLeakReports = grant{name: "leak-reports", rules: []rbacv1.PolicyRule{
	{APIGroups: []string{"switchboard.dev"}, Resources: []string{"leakreports"}, Verbs: []string{"create"}},
}}

// withLeakCatchUp is the chart's grant with server.leakReports.organizationAlerts on, beside
// withLeakReports: the one Lease the catch-up holds (test/chart checks the chart renders it so).
var withLeakCatchUp = grant{name: "leak-catch-up", rules: []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{leakreceiver.CatchUpLease}, Verbs: []string{"get", "update"}},
}}

// serviceAccountConfig returns a client config for a new ServiceAccount holding the server's
// permissions as the Helm chart grants them (charts/switchboard/templates/server-rbac.yaml), the
// system namespace's Secrets only when secrets is set.
func serviceAccountConfig(t *testing.T, secrets bool, grants ...grant) *rest.Config {
	t.Helper()
	ensureSystemNamespace(t)
	name := "server-" + env.Namespace(t, "rbac") // a unique name for cluster-scoped objects
	create := func(obj client.Object) {
		t.Helper()
		if err := env.Client.Create(ctx(t), obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: systemNamespace}}
	create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: systemNamespace}})
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys", "apikeyroles", "apikeycreditpools", "connections"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys/status"}, Verbs: []string{"patch"}},
		// binding.serviceAccountTokens (on by default)
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{NonResourceURLs: []string{"/.well-known/openid-configuration", "/openid/v1/jwks"}, Verbs: []string{"get"}},
	}})
	create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})
	if secrets {
		create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: systemNamespace}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		}})
		create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: systemNamespace}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
	}
	for _, g := range grants {
		role := name + "-" + g.name
		create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: systemNamespace}, Rules: g.rules})
		create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: systemNamespace}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role}})
	}
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx(t), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("minting a token: %v", err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}
