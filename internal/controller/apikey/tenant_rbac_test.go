//go:build !unit

package apikey_test

// Tenant roles as a tenant meets them: the built-in view, edit and admin roles, extended by
// switchboard-view and switchboard-edit through aggregation, done by a real
// kube-controller-manager; and the principals (ServiceAccounts) the attack tests act as.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

var installRolesOnce sync.Once

// installTenantRoles applies the ClusterRoles of config/rbac that tenants and the server get,
// and runs kube-controller-manager's clusterrole-aggregation controller until the built-in
// edit role includes switchboard-edit. Later callers find the roles aggregated already.
func installTenantRoles(t *testing.T) {
	t.Helper()
	installRolesOnce.Do(func() {
		for _, file := range []string{"tenant_roles.yaml", "server_role.yaml"} {
			for _, role := range clusterRolesIn(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", file)) {
				if err := env.Client.Create(testCtx(t), role); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatalf("creating ClusterRole %s: %v", role.Name, err)
				}
			}
		}
		env.StartControllerManager(t, "clusterrole-aggregation")
	})
	eventually(t, "the built-in edit role to aggregate switchboard-edit", func() error {
		edit := &rbacv1.ClusterRole{}
		if err := env.Client.Get(testCtx(t), client.ObjectKey{Name: "edit"}, edit); err != nil {
			return err
		}
		for _, r := range edit.Rules {
			if contains(r.APIGroups, switchboardv1alpha1.GroupVersion.Group) && contains(r.Resources, "apikeys") && contains(r.Verbs, "create") {
				return nil
			}
		}
		return errors.New("not yet")
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// clusterRolesIn reads the ClusterRoles of a multi-document YAML file.
func clusterRolesIn(t *testing.T, path string) []*rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var roles []*rbacv1.ClusterRole
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		role := &rbacv1.ClusterRole{}
		if err := dec.Decode(role); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding %s: %v", path, err)
		}
		if role.Kind == "ClusterRole" {
			roles = append(roles, role)
		}
	}
	return roles
}

// principal is a ServiceAccount bound to a ClusterRole, and a client that acts as it.
type principal struct {
	name   string
	client client.Client
}

// actAs creates ServiceAccount sa in namespace saNS, binds it to clusterRole (in namespace
// bindNS through a RoleBinding, or cluster-wide when bindNS is ""), and returns a client that
// authenticates with a token minted for it (TokenRequest), as a pod or a kubeconfig would.
func actAs(t *testing.T, saNS, sa, clusterRole, bindNS string) principal {
	t.Helper()
	ctx := testCtx(t)
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: sa}}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: sa}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole}
	var binding client.Object = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: bindNS, Name: sa + "-" + clusterRole}, Subjects: subjects, RoleRef: ref}
	if bindNS == "" {
		binding = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: saNS + "-" + sa + "-" + clusterRole}, Subjects: subjects, RoleRef: ref}
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(serviceAccountConfig(t, saNS, sa), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return principal{name: fmt.Sprintf("system:serviceaccount:%s:%s", saNS, sa), client: c}
}

// serviceAccountConfig is a client configuration that authenticates as ServiceAccount sa of
// saNS with a token minted for it (TokenRequest), as a pod's would.
func serviceAccountConfig(t *testing.T, saNS, sa string) *rest.Config {
	t.Helper()
	clientset, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token, err := clientset.CoreV1().ServiceAccounts(saNS).CreateToken(testCtx(t), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("minting a token for ServiceAccount %s/%s: %v", saNS, sa, err)
	}
	return &rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}, BearerToken: token.Status.Token, QPS: 100, Burst: 200}
}

// can asks the API server whether p may do verb on resource (with subresource) in ns.
func can(t *testing.T, p principal, verb, group, resource, subresource, ns string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   p.name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + strings.Split(p.name, ":")[2], "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: subresource,
		},
	}}
	if err := env.Client.Create(testCtx(t), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// TestTenantRoles: the built-in roles, extended by switchboard-view and switchboard-edit through
// aggregation, let a namespace's viewers read and its editors and admins manage Connections and
// APIKeys, and never write a status.
func TestTenantRoles(t *testing.T) {
	installTenantRoles(t)
	t.Parallel()
	ns := env.Namespace(t, "roles")
	viewer, editor, admin := actAs(t, ns, "viewer", "view", ns), actAs(t, ns, "editor", "edit", ns), actAs(t, ns, "admin", "admin", ns)
	group := switchboardv1alpha1.GroupVersion.Group
	tests := []struct {
		who         principal
		verb        string
		resource    string
		subresource string
		want        bool
	}{
		{viewer, "list", "apikeys", "", true},
		{viewer, "get", "connections", "", true},
		{viewer, "create", "apikeys", "", false},
		{viewer, "list", "apikeyroles", "", true},
		{viewer, "update", "apikeyroles", "", false},
		{editor, "create", "apikeyroles", "", true},
		{viewer, "get", "apikeycreditpools", "", true},
		{viewer, "patch", "apikeycreditpools", "", false},
		{editor, "update", "apikeycreditpools", "", true},
		{viewer, "get", "secrets", "", false},
		{editor, "create", "apikeys", "", true},
		{editor, "patch", "apikeys", "", true},
		{editor, "delete", "connections", "", true},
		{editor, "create", "secrets", "", true},
		{editor, "patch", "apikeys", "status", false},
		{editor, "update", "apikeys", "status", false},
		{editor, "patch", "connections", "status", false},
		{admin, "deletecollection", "apikeys", "", true},
		{admin, "patch", "apikeys", "status", false},
		{admin, "update", "connections", "status", false},
	}
	for _, tt := range tests {
		resource := tt.resource
		if tt.subresource != "" {
			resource += "/" + tt.subresource
		}
		t.Run(fmt.Sprintf("%s %s %s", strings.Split(tt.who.name, ":")[3], tt.verb, resource), func(t *testing.T) {
			g := group
			if tt.resource == "secrets" {
				g = ""
			}
			if got := can(t, tt.who, tt.verb, g, tt.resource, tt.subresource, ns); got != tt.want {
				t.Fatalf("allowed=%t, want %t", got, tt.want)
			}
		})
	}

	// And the API server enforces it: an editor's status patch is refused.
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k"}}
	if err := editor.client.Create(testCtx(t), key); err != nil {
		t.Fatalf("an editor cannot create an APIKey: %v", err)
	}
	err := editor.client.Status().Patch(testCtx(t), key, client.RawPatch(types.MergePatchType, []byte(`{"status":{"keyGeneration":7}}`)))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("an editor patched apikeys/status: %v", err)
	}
}
