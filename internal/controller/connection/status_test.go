//go:build !unit

package connection_test

import (
	"errors"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/connection"
)

// TestFailedConnectionReconcileLeavesObservedGeneration: status.observedGeneration says which
// spec a reconcile fully handled, so a reconcile of a Connection whose id cannot be generated
// leaves it, and the id, unset.
func TestFailedConnectionReconcileLeavesObservedGeneration(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t, "conn-fail")
	conn := newConnection(ns, "c", "")
	if err := env.Client.Create(testCtx(t), conn); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("injected: no randomness")
	r := &connection.Reconciler{Client: env.Client, NewID: func() (string, error) { return "", broken }}
	if _, err := r.Reconcile(testCtx(t), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(conn)}); !errors.Is(err, broken) {
		t.Fatalf("want the injected error, got %v", err)
	}
	got := &switchboardv1alpha1.Connection{}
	if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(conn), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 0 || got.Status.ID != "" {
		t.Fatalf("a failed reconcile set observedGeneration %d, id %q", got.Status.ObservedGeneration, got.Status.ID)
	}
}
