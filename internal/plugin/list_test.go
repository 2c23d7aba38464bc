package plugin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func TestKeyList(t *testing.T) {
	ns := env.Namespace(t, "list")
	r := admin(t, ns, "key", "list")
	mustSucceed(t, r)
	if r.stdout != "" || !strings.Contains(r.stderr, "No API keys found") {
		t.Fatalf("empty list: stdout %q stderr %q", r.stdout, r.stderr)
	}

	created := admin(t, ns, "key", "create", "alpha", "--expires-in", "720h", "--timeout", "30s")
	mustSucceed(t, created)
	mustSucceed(t, admin(t, ns, "key", "create", "beta", "--timeout", "30s"))
	mustSucceed(t, admin(t, ns, "key", "revoke", "beta", "--yes"))

	r = admin(t, ns, "key", "list")
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows, got %q", r.stdout)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME HINT STATE CREATED LAST USED EXPIRES" {
		t.Fatalf("header = %q", lines[0])
	}
	alpha, beta := getAPIKey(t, ns, "alpha"), getAPIKey(t, ns, "beta")
	wantRow := func(line string, k *switchboardv1alpha1.APIKey, state, expires string) {
		t.Helper()
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != k.Name || f[1] != k.Status.KeyHint || f[2] != state || !strings.Contains(line, "never") ||
			!strings.Contains(line, expires) {
			t.Fatalf("row %q, want %s %s %s … %s", line, k.Name, k.Status.KeyHint, state, expires)
		}
	}
	wantRow(lines[1], alpha, StateActive, "in 29d")
	wantRow(lines[2], beta, StateRevoked, "never")

	// Once the key authenticates a request, the API server records it and LAST USED says when.
	eventuallyStatus(t, strings.TrimSpace(created.stdout), http.StatusOK)
	err := wait.PollUntilContextTimeout(testContext(t), 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		r = admin(t, ns, "key", "list")
		alphaRow := strings.Split(r.stdout, "\n")[1]
		return r.code == 0 && strings.Count(alphaRow, " ago") == 2 && !strings.Contains(alphaRow, "never"), nil
	})
	if err != nil {
		t.Fatalf("LAST USED never showed the use of the key: %q", r.stdout)
	}

	r = admin(t, ns, "key", "list", "-o", "json")
	mustSucceed(t, r)
	var list switchboardv1alpha1.APIKeyList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "APIKeyList" || len(list.Items) != 2 || list.Items[0].Kind != "APIKey" || list.Items[0].ManagedFields != nil {
		t.Fatalf("-o json: kind %q, %d items, item kind %q", list.Kind, len(list.Items), list.Items[0].Kind)
	}
	r = admin(t, ns, "key", "list", "-o", "yaml")
	mustSucceed(t, r)
	var fromYAML switchboardv1alpha1.APIKeyList
	if err := yaml.Unmarshal([]byte(r.stdout), &fromYAML); err != nil || len(fromYAML.Items) != 2 || fromYAML.Items[1].Spec.Revoked != true {
		t.Fatalf("-o yaml: %v %q", err, r.stdout)
	}
}

func TestConnectionList(t *testing.T) {
	ns := env.Namespace(t, "conns")
	conn := &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warehouse"},
		Spec:       switchboardv1alpha1.ConnectionSpec{DisplayName: "Warehouse", Provider: "postgres"},
	}
	if err := env.Client.Create(testContext(t), conn); err != nil {
		t.Fatal(err)
	}
	var id string
	err := wait.PollUntilContextTimeout(testContext(t), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var got switchboardv1alpha1.Connection
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "warehouse"}, &got); err != nil {
			return false, err
		}
		id = got.Status.ID
		return id != "", nil
	})
	if err != nil {
		t.Fatalf("the operator gave the Connection no id: %v", err)
	}
	// The table may be read before Ready is written with the id; wait for the row to settle.
	var r result
	_ = wait.PollUntilContextTimeout(testContext(t), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		r = admin(t, ns, "connection", "list")
		return strings.Contains(r.stdout, "True"), nil
	})
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ID PROVIDER READY AGE" {
		t.Fatalf("table: %q", r.stdout)
	}
	if f := strings.Fields(lines[1]); len(f) != 5 || f[0] != "warehouse" || f[1] != id || f[2] != "postgres" || f[3] != "True" {
		t.Fatalf("row: %q (id %s)", lines[1], id)
	}
	r = admin(t, ns, "conn", "list", "-o", "json")
	mustSucceed(t, r)
	var list switchboardv1alpha1.ConnectionList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Items) != 1 || list.Items[0].Status.ID != id {
		t.Fatalf("-o json: %v %q", err, r.stdout)
	}
}

func TestForbidden(t *testing.T) {
	ns := env.Namespace(t, "rbac")
	apiKeys := []string{"apikeys"}
	secrets := []string{"secrets"}

	// May read keys but not create them.
	reader := serviceAccountConfig(t, ns, "reader", []rbacv1.PolicyRule{
		rule(switchboardv1alpha1.GroupVersion.Group, apiKeys, "get", "list", "watch"),
	})
	r := run(t, reader, ns, "", "key", "create", "nope", "--timeout", "10s")
	mustFail(t, r, `forbidden: you (system:serviceaccount:`+ns+`:reader) may not create apikeys.switchboard.dev`)
	if !strings.Contains(r.stderr, `namespace "`+ns+`"`) {
		t.Fatalf("the error should name the namespace: %q", r.stderr)
	}
	if err := env.Client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: "nope"}, &switchboardv1alpha1.APIKey{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left an APIKey behind: %v", err)
	}
	mustSucceed(t, run(t, reader, ns, "", "key", "list"))

	// May create keys and read Secrets but not delete them: it could never claim the key.
	noDelete := serviceAccountConfig(t, ns, "no-delete", []rbacv1.PolicyRule{
		rule(switchboardv1alpha1.GroupVersion.Group, apiKeys, "get", "list", "create", "patch"),
		rule("", secrets, "get"),
	})
	r = run(t, noDelete, ns, "", "key", "create", "nope", "--timeout", "10s")
	mustFail(t, r, `forbidden: you (system:serviceaccount:`+ns+`:no-delete) may not delete secrets in namespace "`+ns+`"`)
	if err := env.Client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: "nope"}, &switchboardv1alpha1.APIKey{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left an APIKey behind: %v", err)
	}

	// The refusal comes from the API server itself (no pre-check for revoke): it names the user.
	mustSucceed(t, admin(t, ns, "key", "create", "kept", "--timeout", "30s"))
	r = run(t, reader, ns, "", "key", "revoke", "kept", "--yes")
	mustFail(t, r, `forbidden: you (system:serviceaccount:`+ns+`:reader) may not patch apikeys.switchboard.dev in namespace "`+ns+`"`)
	if getAPIKey(t, ns, "kept").Spec.Revoked {
		t.Fatal("a forbidden revoke revoked the key")
	}
	r = run(t, noDelete, ns, "", "key", "rotate", "kept")
	mustFail(t, r, "may not delete secrets")
	if getAPIKey(t, ns, "kept").Spec.Rotation != nil {
		t.Fatal("a refused rotate requested a rotation")
	}
	mustFail(t, run(t, noDelete, ns, "", "connection", "list"), "may not list connections.switchboard.dev")

	// A token the API server does not know is refused as such.
	stranger := rest.CopyConfig(reader)
	stranger.BearerToken = "not-a-token"
	mustFail(t, run(t, stranger, ns, "", "key", "create", "nope"), "did not accept your credentials")

	// With every right the plugin needs, the same kind of identity succeeds: RBAC decided above.
	full := serviceAccountConfig(t, ns, "full", []rbacv1.PolicyRule{
		rule(switchboardv1alpha1.GroupVersion.Group, apiKeys, "get", "list", "create", "patch"),
		rule("", secrets, "get", "delete"),
	})
	r = run(t, full, ns, "", "key", "create", "mine", "--timeout", "30s")
	mustSucceed(t, r)
	checkKeyMatchesHash(t, ns, "mine", strings.TrimSpace(r.stdout))
	mustSucceed(t, run(t, full, ns, "", "key", "rotate", "mine", "--timeout", "30s"))
}

func TestPanelErrors(t *testing.T) {
	ns := env.Namespace(t, "panel")
	mustFail(t, admin(t, ns, "panel", "-n", ns), `the panel Service "switchboard-panel" was not found in namespace "`+ns+`"`)

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PanelServiceName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "switchboard-server"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("panel")}},
		},
	}
	if err := env.Client.Create(testContext(t), svc); err != nil {
		t.Fatal(err)
	}
	mustFail(t, admin(t, ns, "panel", "-n", ns), "no running and ready pod behind the panel Service")
}

// TestPanelForwardFailureIsClear goes as far as envtest allows: it has no kubelet, so the API
// server cannot reach the pod's node; the plugin must say so in one line, not hang.
func TestPanelForwardFailureIsClear(t *testing.T) {
	ns := env.Namespace(t, "panelpod")
	ctx := testContext(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "no-kubelet-"}}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = 1 // nothing listens there
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server-0", Labels: map[string]string{"app": "switchboard-server"}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{
			Name: "server", Image: "switchboard", Ports: []corev1.ContainerPort{{Name: "panel", ContainerPort: 8081}},
		}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PanelServiceName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "switchboard-server"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("panel")}},
		},
	}
	if err := env.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	r := admin(t, ns, "panel", "-n", ns)
	mustFail(t, r, "port-forwarding to pod "+ns+"/server-0")
	if r.stdout != "" {
		t.Fatalf("printed a URL although nothing is forwarded: %q", r.stdout)
	}
}
