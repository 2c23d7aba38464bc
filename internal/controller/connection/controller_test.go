//go:build !unit

package connection_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/connection"
	"github.com/switchboard-dev/switchboard/internal/operator"
)

var generatedID = regexp.MustCompile(`^conn_[a-z0-9]{20}$`)

func TestGenerateConnectionID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, err := connection.GenerateID()
		if err != nil {
			t.Fatal(err)
		}
		if !generatedID.MatchString(id) {
			t.Fatalf("generated id %q does not match %s", id, generatedID)
		}
		if seen[id] {
			t.Fatalf("generated id %q twice", id)
		}
		seen[id] = true
	}
}

// TestConnectionIDsAssignedOnceAndStable: generated ids are unique, well-formed, and survive a
// restart of the operator unchanged; spec.id pins the id.
func TestConnectionIDsAssignedOnceAndStable(t *testing.T) {
	t.Parallel()
	ns, system := env.Namespace(t, "conn-ids"), env.Namespace(t, "conn-ids-system")
	op := startOperator(t, nil, system, ns)

	const n = 12
	ids := map[string]string{}
	for i := range n {
		id := ""
		if i == 0 {
			id = "conn_pinned" + strings.ToLower(ns[len(ns)-5:])
		}
		if err := env.Client.Create(testCtx(t), newConnection(ns, fmt.Sprintf("c%d", i), id)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for i := range n {
		conn := readyConnection(t, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("c%d", i)})
		if i == 0 {
			if conn.Status.ID != conn.Spec.ID {
				t.Fatalf("spec.id %s did not pin the id: status.id is %s", conn.Spec.ID, conn.Status.ID)
			}
		} else if !generatedID.MatchString(conn.Status.ID) {
			t.Fatalf("generated id %q is not conn_ + 20 base36 characters", conn.Status.ID)
		}
		if seen[conn.Status.ID] {
			t.Fatalf("id %s assigned twice", conn.Status.ID)
		}
		seen[conn.Status.ID] = true
		ids[conn.Name] = conn.Status.ID
	}

	// A restarted operator (a new manager, a new cache) keeps every id, even after the
	// Connections change.
	op.Stop()
	startOperator(t, nil, system, ns)
	for name, id := range ids {
		conn := &switchboardv1alpha1.Connection{}
		if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: name}, conn); err != nil {
			t.Fatal(err)
		}
		conn.Spec.DisplayName = "renamed " + name
		if err := env.Client.Update(testCtx(t), conn); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the restarted operator to observe "+name, func() error {
			got := readyConnection(t, client.ObjectKeyFromObject(conn))
			if got.Status.ObservedGeneration != conn.Generation {
				return fmt.Errorf("observedGeneration %d, want %d", got.Status.ObservedGeneration, conn.Generation)
			}
			if got.Status.ID != id {
				t.Fatalf("id of %s changed across a restart: %s → %s", name, id, got.Status.ID)
			}
			return nil
		})
	}
}

// TestConnectionIDConflict: ids are unique per namespace. A second Connection of the holder's
// namespace pinning its id is refused with IDConflict naming the holder, and gets the id once the
// holder goes; a Connection of another namespace pinning the same id gets it at once (before issue
// 18 it waited in IDConflict, which told a tenant the id existed elsewhere, and took the id over
// when the holder was replaced: TestTenantCannotTakeAnotherTenantsConnectionID).
func TestConnectionIDConflict(t *testing.T) {
	t.Parallel()
	ns1, ns2, system := env.Namespace(t, "conn-a"), env.Namespace(t, "conn-b"), env.Namespace(t, "conn-conflict-system")
	startOperator(t, nil, system, ns1, ns2)

	id := "conn_shared" + strings.ToLower(ns1[len(ns1)-5:])
	first := newConnection(ns1, "first", id)
	if err := env.Client.Create(testCtx(t), first); err != nil {
		t.Fatal(err)
	}
	readyConnection(t, client.ObjectKeyFromObject(first))

	// Another namespace: no conflict, the id is its own there.
	elsewhere := newConnection(ns2, "elsewhere", id)
	if err := env.Client.Create(testCtx(t), elsewhere); err != nil {
		t.Fatal(err)
	}
	if got := readyConnection(t, client.ObjectKeyFromObject(elsewhere)); got.Status.ID != id {
		t.Fatalf("the Connection of another namespace got %s, want its pinned id %s", got.Status.ID, id)
	}

	// The holder's own namespace: IDConflict, naming the holder.
	second := newConnection(ns1, "second", id)
	if err := env.Client.Create(testCtx(t), second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "IDConflict on the second Connection", func() error {
		got := &switchboardv1alpha1.Connection{}
		if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(second), got); err != nil {
			return err
		}
		if got.Status.ID != "" {
			t.Fatalf("the second Connection got the id %s its namesake holds", got.Status.ID)
		}
		c, err := condition(got.Status.Conditions, switchboardv1alpha1.ConditionReady)
		if err != nil {
			return err
		}
		if c.Reason != switchboardv1alpha1.ReasonIDConflict || !strings.Contains(c.Message, "Connection first of this namespace") {
			return fmt.Errorf("Ready %s: %q", c.Reason, c.Message)
		}
		return nil
	})
	// The first keeps its id and stays Ready.
	if got := readyConnection(t, client.ObjectKeyFromObject(first)); got.Status.ID != id {
		t.Fatalf("the holder lost its id: %s", got.Status.ID)
	}

	// Deleting the holder frees the id (Connections have no finalizer).
	if err := env.Client.Delete(testCtx(t), first); err != nil {
		t.Fatal(err)
	}
	if got := readyConnection(t, client.ObjectKeyFromObject(second)); got.Status.ID != id {
		t.Fatalf("the second Connection got %s, want the freed id %s", got.Status.ID, id)
	}
}

// TestConnectionGeneratedIDCollision: a generated id that another Connection already uses is
// thrown away and another one drawn.
func TestConnectionGeneratedIDCollision(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t, "conn-collide")
	taken := "conn_taken" + strings.ToLower(ns[len(ns)-5:])
	fresh := "conn_fresh" + strings.ToLower(ns[len(ns)-5:])

	mgr, err := ctrl.NewManager(operatorConfig(t), ctrl.Options{
		Scheme:     env.Scheme,
		Cache:      operator.CacheOptions(ns, "", []string{ns}),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	drawn := []string{}
	r := &connection.Reconciler{Client: mgr.GetClient(), NewID: func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		// The first draw collides with the pinned id of "holder"; the next is free.
		id := taken
		if len(drawn) > 0 {
			id = fresh
		}
		drawn = append(drawn, id)
		return id, nil
	}}
	if err := r.SetupWithManager(testCtx(t), mgr); err != nil {
		t.Fatal(err)
	}
	holder := newConnection(ns, "holder", taken)
	if err := env.Client.Create(testCtx(t), holder); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	readyConnection(t, client.ObjectKeyFromObject(holder))

	drawer := newConnection(ns, "drawer", "")
	if err := env.Client.Create(testCtx(t), drawer); err != nil {
		t.Fatal(err)
	}
	if got := readyConnection(t, client.ObjectKeyFromObject(drawer)); got.Status.ID != fresh {
		t.Fatalf("id %s, want the second draw %s after the first collided", got.Status.ID, fresh)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(drawn) != 2 || drawn[0] != taken {
		t.Fatalf("draws %v, want the colliding one then a fresh one", drawn)
	}
}
