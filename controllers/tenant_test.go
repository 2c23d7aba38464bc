package controllers_test

// The attacks of docs/security.md that the operator defends against, each performed the way a
// tenant would: with a ServiceAccount bound to its namespace's built-in `edit` role, which the
// switchboard-edit role in config/rbac extends through aggregation (done by a real
// kube-controller-manager), or with the API server's own identity where the attack needs
// apikeys/status.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/controllers"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
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
// bindNS through a RoleBinding, or cluster-wide when bindNS is ""), and returns a client
// that impersonates it. Impersonation reaches the same RBAC decisions as the account's token.
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
	user := fmt.Sprintf("system:serviceaccount:%s:%s", saNS, sa)
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return principal{name: user, client: c}
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

// tenantWorld is one namespace with a running operator and a tenant bound to `edit` in it.
type tenantWorld struct {
	*keyTest
	tenant principal
}

func newTenantWorld(t *testing.T) *tenantWorld {
	t.Helper()
	installTenantRoles(t)
	kt := newKeyTest(t)
	return &tenantWorld{keyTest: kt, tenant: actAs(t, kt.ns, "tenant", "edit", kt.ns)}
}

// authenticates reports whether plaintext authenticates as key in an index built from what the
// API server holds, the way the /v1 server decides.
func (w *tenantWorld) authenticates(key *switchboardv1alpha1.APIKey, plaintext string) bool {
	w.t.Helper()
	idx := keyindex.New()
	if err := idx.SetAPIKey(w.get(key)); err != nil {
		w.t.Fatal(err)
	}
	if hash, err := w.hashSecret(key); err == nil {
		if err := idx.SetHashSecret(hash); err != nil {
			w.t.Fatal(err)
		}
	} else if !apierrors.IsNotFound(err) {
		w.t.Fatal(err)
	}
	h := apikey.Sum(plaintext)
	_, res := idx.Lookup(&h, w.op.clock.Now())
	return res == keyindex.OK
}

// createAsTenant creates an APIKey with the tenant's own rights.
func (w *tenantWorld) createAsTenant(name string, mutate func(*switchboardv1alpha1.APIKey)) *switchboardv1alpha1.APIKey {
	w.t.Helper()
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
	if mutate != nil {
		mutate(key)
	}
	if err := w.tenant.client.Create(testCtx(w.t), key); err != nil {
		w.t.Fatalf("the tenant cannot create an APIKey: %v", err)
	}
	return key
}

// rotateAsTenant requests a rotation with the tenant's own rights.
func (w *tenantWorld) rotateAsTenant(key *switchboardv1alpha1.APIKey, requestedAt string) {
	w.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"rotation":{"requestedAt":%q}}}`, requestedAt)
	if err := w.tenant.client.Patch(testCtx(w.t), w.get(key), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		w.t.Fatalf("the tenant cannot rotate: %v", err)
	}
}

// plantedKey returns a well-formed key of the tenant's choosing.
func plantedKey(t *testing.T) string {
	t.Helper()
	k, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return k
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

// TestTenantCannotFixateRevealedKey (key fixation, reveal): before a rotation, the tenant plants
// <name>-key-<N+1> holding a key of its choosing, labelled and typed like the operator's reveal
// Secret and naming the APIKey as its controller. The rotation replaces it with a fresh key
// (Event KeySecretReplaced); the planted key never authenticates and is never claimed.
func TestTenantCannotFixateRevealedKey(t *testing.T) {
	w := newTenantWorld(t)
	key := w.createAsTenant("svc", nil)
	key = w.waitIssued(key, 1)
	if _, err := keyclient.Claim(testCtx(t), w.tenant.client, key); err != nil {
		t.Fatalf("the tenant cannot claim its key: %v", err)
	}

	planted := plantedKey(t)
	trap := keysecret.NewReveal(key, 2, planted)
	// A tenant may name an owner, but not block its deletion (that needs apikeys/finalizers).
	trap.OwnerReferences[0].BlockOwnerDeletion = nil
	if err := w.tenant.client.Create(testCtx(t), trap); err != nil {
		t.Fatalf("planting %s: %v", trap.Name, err)
	}
	w.rotateAsTenant(key, "after-compromise")
	key = w.waitIssued(key, 2)

	if w.authenticates(key, planted) {
		t.Fatal("the planted key authenticates")
	}
	got, err := keyclient.Claim(testCtx(t), w.tenant.client, key)
	if err != nil {
		t.Fatalf("claiming the rotated key: %v", err)
	}
	if got.Key == planted {
		t.Fatal("the claim returned the planted key")
	}
	if !w.authenticates(key, got.Key) {
		t.Fatal("the key issued in place of the planted one does not authenticate")
	}
	w.waitEvent(key, controllers.ReasonKeySecretReplaced, "svc-key-2")
}

// TestTenantCannotFixateWithForeignSecret: a planted Secret with the reveal Secret's name,
// labels and type but no controller reference is not the operator's: it is neither adopted nor
// deleted, and the rotation waits (DeliveryConflict) while the current key keeps working.
func TestTenantCannotFixateWithForeignSecret(t *testing.T) {
	w := newTenantWorld(t)
	key := w.createAsTenant("svc", nil)
	key = w.waitIssued(key, 1)
	current, err := keyclient.Claim(testCtx(t), w.tenant.client, key)
	if err != nil {
		t.Fatal(err)
	}

	planted := plantedKey(t)
	trap := keysecret.NewReveal(key, 2, planted)
	trap.OwnerReferences = nil
	if err := w.tenant.client.Create(testCtx(t), trap); err != nil {
		t.Fatal(err)
	}
	w.rotateAsTenant(key, "after-compromise")
	key = w.waitFor(key, "the rotation refused", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict)
	})
	if key.Status.KeyGeneration != 1 {
		t.Fatalf("keyGeneration %d: the planted Secret was adopted", key.Status.KeyGeneration)
	}
	if w.authenticates(key, planted) {
		t.Fatal("the planted key authenticates")
	}
	if !w.authenticates(key, current.Key) {
		t.Fatal("the current key stopped working")
	}
	if _, err := w.secret(trap.Name); err != nil {
		t.Fatalf("the operator deleted a Secret it does not control: %v", err)
	}
}

// TestTenantCannotFixateDeliveredKey (key fixation, delivery): the tenant writes a key of its
// choosing into the delivery Secret, labelled as the next generation. The operator sees that
// the Secret no longer holds the current key and issues the next one into it; it finds no hash
// it stored for that generation, so it replaces the planted key instead of adopting it.
func TestTenantCannotFixateDeliveredKey(t *testing.T) {
	w := newTenantWorld(t)
	key := w.createAsTenant("svc", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "svc-creds" })
	key = w.waitIssued(key, 1)

	planted := plantedKey(t)
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"2"}},"data":{%q:%q}}`, keysecret.LabelGeneration, keysecret.DataKey,
		base64.StdEncoding.EncodeToString([]byte(planted)))
	delivery := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "svc-creds"}}
	if err := w.tenant.client.Patch(testCtx(t), delivery, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("the tenant cannot write its delivery Secret: %v", err)
	}
	key = w.waitIssued(key, 2)

	s, err := w.secret("svc-creds")
	if err != nil {
		t.Fatal(err)
	}
	delivered := plaintextOf(t, s)
	if delivered == planted {
		t.Fatal("the planted key was adopted")
	}
	if w.authenticates(key, planted) {
		t.Fatal("the planted key authenticates")
	}
	if !w.authenticates(key, delivered) {
		t.Fatal("the delivered key does not authenticate")
	}
	w.waitEvent(key, controllers.ReasonKeySecretReplaced, "svc-creds")
}

// TestStatusCannotMakeOperatorDeleteSecrets (confused deputy): whoever may patch apikeys/status
// (the API server's identity, which writes lastUsedAt) points status.revealSecretName at an
// unrelated Secret with a deadline in the past. The operator deletes only Secrets this APIKey
// controls: the unrelated one survives. A tenant with `edit` may not even try.
func TestStatusCannotMakeOperatorDeleteSecrets(t *testing.T) {
	w := newTenantWorld(t)
	server := actAs(t, w.ns, "switchboard-server", "switchboard-server", "")
	precious := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "db-password"},
		StringData: map[string]string{"password": "hunter2"}}
	if err := w.tenant.client.Create(testCtx(t), precious); err != nil {
		t.Fatal(err)
	}
	key := w.createAsTenant("svc", nil)
	key = w.waitIssued(key, 1)

	past := w.op.clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	patch := []byte(fmt.Sprintf(`{"status":{"revealSecretName":"db-password","revealExpiresAt":%q}}`, past))
	if err := w.tenant.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, patch)); !apierrors.IsForbidden(err) {
		t.Fatalf("a tenant with edit patched apikeys/status: %v", err)
	}
	if err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("the server's identity cannot patch apikeys/status: %v", err)
	}
	w.waitFor(key, "the operator to act on the forged deadline", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.RevealSecretName != "" {
			return fmt.Errorf("revealSecretName %q", k.Status.RevealSecretName)
		}
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealExpired)
	})
	got, err := w.secret("db-password")
	if err != nil {
		t.Fatalf("the operator deleted an unrelated Secret named by a forged status: %v", err)
	}
	if string(got.Data["password"]) != "hunter2" {
		t.Fatal("the unrelated Secret was changed")
	}
}

// TestTenantCannotUnrevoke: a JSON patch that removes the spec of a revoked APIKey, sent by a
// tenant with `edit`, is refused, and the key stays refused.
func TestTenantCannotUnrevoke(t *testing.T) {
	w := newTenantWorld(t)
	key := w.createAsTenant("svc", nil)
	key = w.waitIssued(key, 1)
	held, err := keyclient.Claim(testCtx(t), w.tenant.client, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.tenant.client.Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"revoked":true}}`))); err != nil {
		t.Fatal(err)
	}
	key = w.waitFor(key, "revoked", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.RevokedAt == nil {
			return errors.New("no revokedAt yet")
		}
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked)
	})
	err = w.tenant.client.Patch(testCtx(t), w.get(key), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec"}]`)))
	if err == nil || !strings.Contains(err.Error(), "a revoked key cannot be un-revoked") {
		t.Fatalf("removing the spec of a revoked key must be refused, got %v", err)
	}
	poke(t, key)
	if got := w.waitFor(key, "still revoked", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked)
	}); got.Status.KeyGeneration != 1 || w.authenticates(got, held.Key) {
		t.Fatalf("the revoked key came back: generation %d", got.Status.KeyGeneration)
	}
}

// TestOperatorNeverIssuesForARevokedKey: the operator's own record that it saw a key revoked
// (status.revokedAt) keeps the key revoked when the spec alone would not (a validation rule
// bypassed, an older CRD): the hash goes, and no rotation ever issues a key again.
func TestOperatorNeverIssuesForARevokedKey(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	w.createKey("k", nil)
	w.settle("k")
	key := w.mustKey("k")
	before := key.DeepCopy()
	revokedAt := metav1.NewTime(w.clock.Now())
	key.Status.RevokedAt = &revokedAt
	if err := env.Client.Status().Patch(testCtx(t), key, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	w.settle("k")
	key = w.mustKey("k")
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked); err != nil {
		t.Fatal(err)
	}
	if key.Spec.Revoked {
		t.Fatal("the spec was changed; this test is about the status alone")
	}
	hash := &corev1.Secret{}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, hash); !apierrors.IsNotFound(err) {
		t.Fatalf("the hash of a key revoked in status is still there (err %v)", err)
	}

	before = key.DeepCopy()
	key.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "please"}
	if err := env.Client.Patch(testCtx(t), key, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	w.settle("k")
	key = w.mustKey("k")
	if key.Status.KeyGeneration != 1 || !key.Status.RevokedAt.Equal(&revokedAt) {
		t.Fatalf("a rotation of a revoked key issued generation %d (revokedAt %v)", key.Status.KeyGeneration, key.Status.RevokedAt)
	}
	for _, name := range []string{keysecret.RevealName("k", 2)} {
		if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.ns, Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a reveal Secret %s was created for a revoked key (err %v)", name, err)
		}
	}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, hash); !apierrors.IsNotFound(err) {
		t.Fatalf("a hash was written for a revoked key (err %v)", err)
	}
}
