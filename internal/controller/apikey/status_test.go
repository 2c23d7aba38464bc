//go:build !unit

package apikey_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

var errSecretsDown = errors.New("injected: Secret writes fail")

// TestFailedReconcileLeavesObservedGeneration: status.observedGeneration says which spec a
// reconcile fully handled, so a failed reconcile does not move it, even when it stores what
// it found (Ready=False Issuing); the next good one does.
func TestFailedReconcileLeavesObservedGeneration(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	w.createKey("k", nil)
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: w.ns, Name: "k"}}

	// The first reconcile only adds the finalizer (a step of its own); the next one issues.
	if _, err := w.reconciler(failing(true, func(*corev1.Secret) bool { return true })).Reconcile(testCtx(t), req); err != nil {
		t.Fatalf("adding the finalizer: %v", err)
	}
	if _, err := w.reconciler(failing(true, func(*corev1.Secret) bool { return true })).Reconcile(testCtx(t), req); !errors.Is(err, errSecretsDown) {
		t.Fatalf("want the injected error, got %v", err)
	}
	key := w.mustKey("k")
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonIssuing); err != nil {
		t.Fatalf("the failed reconcile did not store what it found: %v", err)
	}
	if key.Status.ObservedGeneration != 0 {
		t.Fatalf("a failed reconcile set observedGeneration %d", key.Status.ObservedGeneration)
	}

	w.settle("k")
	key = w.mustKey("k")
	if key.Status.ObservedGeneration != key.Generation || key.Status.KeyGeneration != 1 {
		t.Fatalf("after a good reconcile: observedGeneration %d of %d, keyGeneration %d", key.Status.ObservedGeneration, key.Generation, key.Status.KeyGeneration)
	}

	// A rotation whose Secret cannot be written: the spec moved on, the status did not.
	before := key.DeepCopy()
	key.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "now"}
	if err := env.Client.Patch(testCtx(t), key, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.reconciler(failing(true, func(*corev1.Secret) bool { return true })).Reconcile(testCtx(t), req); !errors.Is(err, errSecretsDown) {
		t.Fatalf("want the injected error, got %v", err)
	}
	key = w.mustKey("k")
	if key.Status.ObservedGeneration == key.Generation {
		t.Fatalf("a failed rotation marked generation %d observed", key.Generation)
	}
	w.settle("k")
	if key = w.mustKey("k"); key.Status.ObservedGeneration != key.Generation || key.Status.KeyGeneration != 2 {
		t.Fatalf("after a good reconcile: observedGeneration %d of %d, keyGeneration %d", key.Status.ObservedGeneration, key.Generation, key.Status.KeyGeneration)
	}
}
