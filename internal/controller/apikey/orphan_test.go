//go:build !unit

package apikey_test

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// TestTenantCannotLeaveHashSecretsBehind (hash Secrets outliving their APIKey): a tenant with
// `edit` removes the finalizer of an APIKey and deletes it, so that the operator never runs its
// clean-up; then deletes another the same way and creates a new APIKey under its name. The
// hash Secrets of both deleted APIKeys go — while the operator runs, and when it was down
// during the deletion (its informer's first list sends every leftover through the
// reconcile) — and the hash Secret and key of the new namesake are its own and work.
func TestTenantCannotLeaveHashSecretsBehind(t *testing.T) {
	w := newTenantWorld(t)
	// removeAndDelete does what the tenant does: off with the finalizer, then delete.
	removeAndDelete := func(key *switchboardv1alpha1.APIKey) {
		t.Helper()
		patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/uid","value":%q},{"op":"remove","path":"/metadata/finalizers"}]`, key.UID)
		if err := w.tenant.client.Patch(testCtx(t), w.get(key), client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
			t.Fatalf("the tenant cannot remove the finalizer: %v", err)
		}
		uid := key.UID
		if err := w.tenant.client.Delete(testCtx(t), w.get(key), client.Preconditions{UID: &uid}); err != nil {
			t.Fatalf("the tenant cannot delete the APIKey: %v", err)
		}
	}
	hashGone := func(key *switchboardv1alpha1.APIKey) {
		t.Helper()
		eventually(t, "the hash Secret of deleted APIKey "+key.Name+" to go", func() error {
			if _, err := w.hashSecret(key); !apierrors.IsNotFound(err) {
				return fmt.Errorf("hash Secret still there (err %w)", err)
			}
			return nil
		})
	}

	// While the operator runs (it may re-add the finalizer first; either way the hash goes).
	running := w.waitIssued(w.createAsTenant("running", nil), 1)
	removeAndDelete(running)
	hashGone(running)

	// While the operator is down: nothing but the informer's first list can find these.
	gone := w.waitIssued(w.createAsTenant("gone", nil), 1)
	reused := w.waitIssued(w.createAsTenant("reused", nil), 1)
	goneKey, err := keyclient.Claim(testCtx(t), w.tenant.client, gone)
	if err != nil {
		t.Fatal(err)
	}
	// Claimed, so that no reveal Secret of the deleted APIKey is left under the name the
	// namesake's first key uses (envtest runs no garbage collector to remove it).
	if _, err := keyclient.Claim(testCtx(t), w.tenant.client, reused); err != nil {
		t.Fatal(err)
	}
	w.op.Stop()
	removeAndDelete(gone)
	removeAndDelete(reused)
	for _, key := range []*switchboardv1alpha1.APIKey{gone, reused} {
		if _, err := w.hashSecret(key); err != nil {
			t.Fatalf("the test expects the hash Secret of %s to be left behind, got %v", key.Name, err)
		}
	}
	namesake := w.createAsTenant("reused", nil)
	w.op = startOperator(t, w.op.Clock, w.system, w.ns)
	hashGone(gone)
	hashGone(reused)
	namesake = w.waitIssued(namesake, 1)
	claimed, err := keyclient.Claim(testCtx(t), w.tenant.client, namesake)
	if err != nil {
		t.Fatal(err)
	}
	if !w.authenticates(namesake, claimed.Key) {
		t.Fatal("the new namesake's key does not authenticate")
	}
	if _, err := w.hashSecret(namesake); err != nil {
		t.Fatalf("the new namesake's hash Secret went too: %v", err)
	}
	if goneKey.Key == claimed.Key {
		t.Fatal("the namesake was handed the deleted APIKey's key")
	}
}
