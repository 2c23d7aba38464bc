//go:build !unit

package apikey_test

// The attacks of docs/security.md that the operator defends against, each performed the way a
// tenant would: with a ServiceAccount bound to its namespace's built-in `edit` role, which the
// switchboard-edit role in config/rbac extends through aggregation (done by a real
// kube-controller-manager), or with the API server's own identity where the attack needs
// apikeys/status.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
)

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
	if err := keyindextest.PutAPIKey(idx, w.get(key)); err != nil {
		w.t.Fatal(err)
	}
	if hash, err := w.hashSecret(key); err == nil {
		if err := keyindextest.PutHashSecret(idx, hash); err != nil {
			w.t.Fatal(err)
		}
	} else if !apierrors.IsNotFound(err) {
		w.t.Fatal(err)
	}
	h := apikey.Sum(plaintext)
	_, res := idx.Lookup(&h, w.op.Clock.Now())
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
	w.waitEvent(key, apikeyctrl.ReasonKeySecretReplaced, "svc-key-2")
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
	w.waitEvent(key, apikeyctrl.ReasonKeySecretReplaced, "svc-creds")
}

// TestStatusCannotMakeOperatorDeleteSecrets (confused deputy): whoever may patch apikeys/status
// (the API server's identity, which writes lastUsedAt; here without the admission policy that
// stops it since issue 18) points status.revealSecretName at an unrelated Secret with a deadline
// in the past. The operator deletes only Secrets this APIKey controls, and the deadline is the
// one its hash Secret records: the unrelated Secret survives, the status is put back, and the
// reveal stays pending (before issue 18 a forged past deadline ended it early). A tenant with
// `edit` may not even try.
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
	recorded := key.Status.RevealExpiresAt.DeepCopy()

	past := w.op.Clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	patch := []byte(fmt.Sprintf(`{"status":{"revealSecretName":"db-password","revealExpiresAt":%q}}`, past))
	if err := w.tenant.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, patch)); !apierrors.IsForbidden(err) {
		t.Fatalf("a tenant with edit patched apikeys/status: %v", err)
	}
	if err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("the server's identity cannot patch apikeys/status: %v", err)
	}
	w.waitFor(key, "the operator to put the status back", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.RevealSecretName != keysecret.RevealName("svc", 1) || !k.Status.RevealExpiresAt.Equal(recorded) {
			return fmt.Errorf("revealSecretName %q, revealExpiresAt %v; want %s and %v", k.Status.RevealSecretName, k.Status.RevealExpiresAt, keysecret.RevealName("svc", 1), recorded)
		}
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealPending)
	})
	got, err := w.secret("db-password")
	if err != nil {
		t.Fatalf("the operator deleted an unrelated Secret named by a forged status: %v", err)
	}
	if string(got.Data["password"]) != "hunter2" {
		t.Fatal("the unrelated Secret was changed")
	}
	if _, err := w.secret(keysecret.RevealName("svc", 1)); err != nil {
		t.Fatalf("a forged deadline ended the reveal early: %v", err)
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

// TestOperatorNeverIssuesForARevokedKey: a key revoked in its spec loses its hash, and nothing
// brings it back: the spec cannot be un-revoked (TestTenantCannotUnrevoke) nor rotated, and
// status.revokedAt records the revocation for good. The status alone never revokes: the API
// server refuses status.revokedAt on a key whose spec is not revoked, from anyone (before issue
// 18 the operator revoked on it, so one status patch by the server's identity ended any key).
func TestOperatorNeverIssuesForARevokedKey(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	w.createKey("k", nil)
	w.settle("k")
	key := w.mustKey("k")
	before := key.DeepCopy()
	revokedAt := metav1.NewTime(w.clock.Now())
	key.Status.RevokedAt = &revokedAt
	err := env.Client.Status().Patch(testCtx(t), key, client.MergeFrom(before))
	if err == nil || !strings.Contains(err.Error(), "status.revokedAt can be set only on a revoked key") {
		t.Fatalf("status.revokedAt on a key not revoked must be refused with a clear message, got %v", err)
	}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, &corev1.Secret{}); err != nil {
		t.Fatalf("the hash of a key not revoked is gone: %v", err)
	}

	key = w.mustKey("k")
	before = key.DeepCopy()
	key.Spec.Revoked = true
	if err := env.Client.Patch(testCtx(t), key, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	w.settle("k")
	key = w.mustKey("k")
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked); err != nil {
		t.Fatal(err)
	}
	if key.Status.RevokedAt == nil {
		t.Fatal("the revocation was not recorded in status.revokedAt")
	}
	hash := &corev1.Secret{}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, hash); !apierrors.IsNotFound(err) {
		t.Fatalf("the hash of a revoked key is still there (err %v)", err)
	}
	before = key.DeepCopy()
	key.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "please"}
	if err := env.Client.Patch(testCtx(t), key, client.MergeFrom(before)); err == nil || !strings.Contains(err.Error(), "a revoked key cannot be rotated") {
		t.Fatalf("rotating a revoked key must be refused, got %v", err)
	}
	w.settle("k")
	key = w.mustKey("k")
	if key.Status.KeyGeneration != 1 {
		t.Fatalf("a revoked key issued generation %d", key.Status.KeyGeneration)
	}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.ns, Name: keysecret.RevealName("k", 2)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a reveal Secret was created for a revoked key (err %v)", err)
	}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, hash); !apierrors.IsNotFound(err) {
		t.Fatalf("a hash was written for a revoked key (err %v)", err)
	}
}

// TestTenantCannotTakeAnotherTenantsConnectionID performs issue 18's id theft as a tenant with
// `edit` would: it pins spec.id to an id tenant B's Connection holds, and waits for B to replace
// its Connection (a GitOps replace, a restore: delete, then create with the same spec.id).
// Before issue 18 the attacker's Connection waited in IDConflict, which told it that the id
// existed elsewhere, and being the older claim it took the id when B's holder went: B's
// re-created Connection got IDConflict and B's keys listed nothing. Ids are now unique per
// namespace: the attacker learns nothing (its Connection is Ready at once, whether or not the id
// exists elsewhere) and B's re-created Connection gets B's id back.
func TestTenantCannotTakeAnotherTenantsConnectionID(t *testing.T) {
	t.Parallel()
	installTenantRoles(t)
	victimNS, attackerNS, system := env.Namespace(t, "idtheft-b"), env.Namespace(t, "idtheft-a"), env.Namespace(t, "idtheft-system")
	startOperator(t, nil, system, victimNS, attackerNS)
	attacker := actAs(t, attackerNS, "tenant", "edit", attackerNS)
	victim := actAs(t, victimNS, "tenant", "edit", victimNS)

	id := "conn_victim" + strings.ToLower(victimNS[len(victimNS)-5:])
	if err := victim.client.Create(testCtx(t), newConnection(victimNS, "payments", id)); err != nil {
		t.Fatal(err)
	}
	readyConnection(t, client.ObjectKey{Namespace: victimNS, Name: "payments"})

	// The attacker pins the victim's id, and an id nobody holds: both answers must look alike.
	for name, pinned := range map[string]string{"stolen": id, "control": "conn_nobody" + strings.ToLower(attackerNS[len(attackerNS)-5:])} {
		if err := attacker.client.Create(testCtx(t), newConnection(attackerNS, name, pinned)); err != nil {
			t.Fatal(err)
		}
		got := readyConnection(t, client.ObjectKey{Namespace: attackerNS, Name: name})
		c, err := condition(got.Status.Conditions, switchboardv1alpha1.ConditionReady)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.ID != pinned || c.Reason != switchboardv1alpha1.ReasonIDAssigned {
			t.Fatalf("the attacker's %s Connection: id %q, Ready %s %q; want its pinned id and IDAssigned, whether or not another namespace holds it", name, got.Status.ID, c.Reason, c.Message)
		}
	}

	// The victim replaces its Connection, as a GitOps replace or a restore does.
	old := &switchboardv1alpha1.Connection{}
	if err := victim.client.Get(testCtx(t), client.ObjectKey{Namespace: victimNS, Name: "payments"}, old); err != nil {
		t.Fatal(err)
	}
	if err := victim.client.Delete(testCtx(t), old); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the victim's Connection to be gone", func() error {
		err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(old), &switchboardv1alpha1.Connection{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
	if err := victim.client.Create(testCtx(t), newConnection(victimNS, "payments", id)); err != nil {
		t.Fatal(err)
	}
	got := readyConnection(t, client.ObjectKey{Namespace: victimNS, Name: "payments"})
	if got.UID == old.UID || got.Status.ID != id {
		t.Fatalf("the victim's re-created Connection has id %q, want its own %s", got.Status.ID, id)
	}
	// And the attacker's Connection has not changed: no id of the victim's namespace moved to it.
	if a := readyConnection(t, client.ObjectKey{Namespace: attackerNS, Name: "stolen"}); a.Status.ID != id {
		t.Fatalf("the attacker's Connection changed id to %s", a.Status.ID)
	}
}
