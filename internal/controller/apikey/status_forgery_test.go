//go:build !unit

package apikey_test

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestStatusCannotMakeOperatorIssueAKey (forged issuance record): whoever may patch
// apikeys/status (the server's identity, which writes lastUsedAt in every namespace) rewrites
// the fields that used to tell the operator whether a key was issued and which rotation it
// handled: status.lastHandledRotationAt (a rotation seems pending), status.keyGeneration 0
// (no key seems issued) and a keyGeneration ahead of the hash. Each time the operator puts the
// status back from its own record in the hash Secret: the key in use keeps authenticating, its
// hash is untouched, and no new key (no reveal Secret of another generation) is issued.
func TestStatusCannotMakeOperatorIssueAKey(t *testing.T) {
	w := newTenantWorld(t)
	server := actAs(t, w.ns, "switchboard-server", "switchboard-server", "")
	key := w.createAsTenant("svc", func(k *switchboardv1alpha1.APIKey) {
		// A grace of zero: a rotation the attacker could trigger would end the key at once.
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "r1"}
	})
	key = w.waitIssued(key, 1)
	held, err := keyclient.Claim(testCtx(t), w.tenant.client, key)
	if err != nil {
		t.Fatal(err)
	}
	hint := key.Status.KeyHint
	sum := apikey.Sum(held.Key).String()

	forgeries := []struct {
		name  string
		patch string
	}{
		{"a rotation seems pending", `{"status":{"lastHandledRotationAt":"forged"}}`},
		{"no key seems issued", `{"status":{"keyGeneration":null,"lastHandledRotationAt":null,"keyHint":null}}`},
		{"a generation ahead of the hash", `{"status":{"keyGeneration":7}}`},
		{"an older generation", `{"status":{"keyGeneration":0}}`},
	}
	for _, f := range forgeries {
		if err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, []byte(f.patch))); err != nil {
			t.Fatalf("%s: the server's identity cannot patch apikeys/status: %v", f.name, err)
		}
		got := w.waitFor(key, f.name+": the status put back from the hash Secret", func(k *switchboardv1alpha1.APIKey) error {
			if k.Status.KeyGeneration != 1 || k.Status.LastHandledRotationAt != "r1" || k.Status.KeyHint != hint {
				return fmt.Errorf("keyGeneration %d, lastHandledRotationAt %q, keyHint %q", k.Status.KeyGeneration, k.Status.LastHandledRotationAt, k.Status.KeyHint)
			}
			return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)
		})
		hash := w.mustHash(got)
		if g := keysecret.Generation(hash); g != 1 || string(hash.Data[keysecret.DataHash]) != sum {
			t.Fatalf("%s: the hash Secret now hashes another key (generation %d)", f.name, g)
		}
		if !w.authenticates(got, held.Key) {
			t.Fatalf("%s: the key in use stopped working", f.name)
		}
		for _, gen := range []int64{1, 2, 8} {
			if _, err := w.secret(keysecret.RevealName("svc", gen)); !apierrors.IsNotFound(err) {
				t.Fatalf("%s: a reveal Secret for key generation %d exists: a key was issued (err %v)", f.name, gen, err)
			}
		}
	}
	w.waitEvent(key, apikeyctrl.ReasonStatusRestored, hint)

	// A real rotation still works, and issues generation 2 from the hash Secret's record.
	w.rotateAsTenant(key, "r2")
	got := w.waitIssued(key, 2)
	if got.Status.LastHandledRotationAt != "r2" {
		t.Fatalf("lastHandledRotationAt %q after the rotation", got.Status.LastHandledRotationAt)
	}
	if w.authenticates(got, held.Key) {
		t.Fatal("the rotated-away key (grace 0) still authenticates")
	}
	if got.Status.KeyHint == hint {
		t.Fatal("the rotation kept the hint of the old key")
	}
}
