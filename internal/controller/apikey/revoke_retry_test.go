//go:build !unit

package apikey_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestFailedRevocationIsRetried: a revocation whose clean-up fails after the hash is gone (the
// unclaimed reveal Secret cannot be deleted) still shows Ready=Revoked, and the next
// reconcile finishes it: the reveal Secret, which holds the revoked key, is deleted and the
// status no longer publishes it.
func TestFailedRevocationIsRetried(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	w.createKey("k", nil)
	w.settle("k")
	key := w.mustKey("k")
	reveal := key.Status.RevealSecretName
	if reveal == "" {
		t.Fatal("the test needs an unclaimed reveal Secret")
	}
	before := key.DeepCopy()
	key.Spec.Revoked = true
	if err := env.Client.Patch(testCtx(t), key, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: w.ns, Name: "k"}}
	if _, err := w.reconciler(failing(false, func(s *corev1.Secret) bool { return s.Namespace == w.ns })).Reconcile(testCtx(t), req); !errors.Is(err, errSecretsDown) {
		t.Fatalf("want the injected error, got %v", err)
	}
	key = w.mustKey("k")
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the test expects the hash to be gone after the failed reconcile (err %v)", err)
	}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.ns, Name: reveal}, &corev1.Secret{}); err != nil {
		t.Fatalf("the test expects the reveal Secret to survive the failed reconcile: %v", err)
	}

	w.settle("k")
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.ns, Name: reveal}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the reveal Secret of the revoked key is still there after the retry (err %v)", err)
	}
	key = w.mustKey("k")
	if key.Status.RevealSecretName != "" || key.Status.ObservedGeneration != key.Generation {
		t.Fatalf("revealSecretName %q, observedGeneration %d of %d", key.Status.RevealSecretName, key.Status.ObservedGeneration, key.Generation)
	}
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked); err != nil {
		t.Fatal(err)
	}
}
