//go:build !unit

package apikey_test

// The operator never writes what its users own (issue 31, item 2). A GitOps tool applies the
// user's manifest again and again; when the operator revoked a key for want of use by writing
// spec.revoked, the re-apply of `revoked: false` conflicted with the operator's field (server-side
// apply) or was refused by the rule that keeps a revocation final (client-side apply), and Argo CD
// showed the APIKey OutOfSync for good. Now the revocation lives in the hash Secret and the
// status, and a re-apply changes nothing.

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

// lastApplied is the annotation kubectl's client-side apply keeps the applied manifest in.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// userManifest is the APIKey as its user keeps it in Git: revokeWhenUnusedFor, and revoked
// written out as false.
func userManifest(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": switchboardv1alpha1.GroupVersion.String(),
		"kind":       "APIKey",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       map[string]any{"revokeWhenUnusedFor": "24h", "revoked": false},
	}}
}

// applyServerSide applies m as Argo CD does with server-side apply: its own field manager, no
// force, so a field another manager changed is a conflict.
func applyServerSide(t *testing.T, m *unstructured.Unstructured) error {
	t.Helper()
	return env.Client.Apply(testCtx(t), client.ApplyConfigurationFromUnstructured(m.DeepCopy()), client.FieldOwner("argocd-controller"))
}

// applyClientSide applies m as `kubectl apply` does without --server-side: created with the
// manifest in the last-applied annotation, then merge-patched with it (for a custom resource
// kubectl sends a JSON merge patch; the manifest itself is the patch's upper bound).
func applyClientSide(t *testing.T, m *unstructured.Unstructured, create bool) error {
	t.Helper()
	raw, err := json.Marshal(m.Object)
	if err != nil {
		t.Fatal(err)
	}
	obj := m.DeepCopy()
	obj.SetAnnotations(map[string]string{lastApplied: string(raw)})
	if create {
		return env.Client.Create(testCtx(t), obj, client.FieldOwner("kubectl-client-side-apply"))
	}
	patch, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	return env.Client.Patch(testCtx(t), obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-client-side-apply"))
}

// TestGitOpsReapplyAfterRevocationForDisuse: two APIKeys, one applied by server-side apply (as
// Argo CD's "argocd-controller"), one by client-side apply (kubectl), are revoked by the operator
// for want of use (the injected clock crosses revokeWhenUnusedFor). Applying each user's
// unchanged manifest again goes through with no conflict and changes nothing (same generation,
// spec.revoked still false as written), and the key stays revoked: refused by the server's index,
// the status saying so. Before issue 31 both re-applies failed.
func TestGitOpsReapplyAfterRevocationForDisuse(t *testing.T) {
	kt := newKeyTest(t)
	argo, kubectl := userManifest(kt.ns, "argo"), userManifest(kt.ns, "kubectl")
	if err := applyServerSide(t, argo); err != nil {
		t.Fatalf("server-side apply: %v", err)
	}
	if err := applyClientSide(t, kubectl, true); err != nil {
		t.Fatalf("client-side apply: %v", err)
	}
	plaintexts := map[string]string{}
	var keys []*switchboardv1alpha1.APIKey
	for _, m := range []*unstructured.Unstructured{argo, kubectl} {
		key := kt.waitIssued(&switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName()}}, 1)
		reveal, err := kt.secret(key.Status.RevealSecretName)
		if err != nil {
			t.Fatal(err)
		}
		plaintexts[key.Name] = plaintextOf(t, reveal)
		keys = append(keys, key)
	}
	kt.op.Clock.SetTime(keys[0].CreationTimestamp.Add(25 * time.Hour))
	for i, key := range keys {
		poke(t, key)
		keys[i] = kt.waitRevokedUnused(key)
	}

	if err := applyServerSide(t, argo); err != nil {
		t.Errorf("server-side apply of the unchanged manifest after the revocation: %v", err)
	}
	if err := applyClientSide(t, kubectl, false); err != nil {
		t.Errorf("client-side apply of the unchanged manifest after the revocation: %v", err)
	}
	for _, before := range keys {
		after := kt.waitRevokedUnused(before)
		if after.Generation != before.Generation || after.Spec.Revoked || after.Spec.RevokeWhenUnusedFor == nil ||
			after.Spec.RevokeWhenUnusedFor.Duration != 24*time.Hour {
			t.Errorf("%s: the re-apply changed the spec: generation %d → %d, revoked %t, revokeWhenUnusedFor %v",
				after.Name, before.Generation, after.Generation, after.Spec.Revoked, after.Spec.RevokeWhenUnusedFor)
		}
		if got := kt.lookupAt(after, plaintexts[after.Name], kt.op.Clock.Now()); got != keyindex.Revoked {
			t.Errorf("%s: after the re-apply the server's index says %s of the key, want revoked", after.Name, got)
		}
	}
}
