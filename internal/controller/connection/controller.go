// Package connection is the Connection controller: it gives each Connection its public id,
// once (generated, or pinned by spec.id), unique within its namespace.
package connection

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"slices"

	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller"
	"github.com/switchboard-dev/switchboard/internal/fairqueue"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// IDIndex indexes Connections by their namespace and public id (idIndexKey): status.id
// and spec.id, so that a pinned id collides with an assigned one before its owner has a status.
//
// An id is unique within its namespace, never across namespaces: the /v1 list is a namespace's,
// and an id that one tenant's Connection held cluster-wide could be claimed by another tenant
// pinning it (and taken over when the holder was replaced), and its conflict told every tenant
// which ids the others use. Generated ids are 103 random bits, so they do not repeat anywhere.
const IDIndex = "switchboard.dev/connection-id"

// idIndexKey is the IDIndex value of id in namespace.
func idIndexKey(namespace, id string) string { return namespace + "/" + id }

// generatedIDLength is the number of base36 characters after "conn_": 20 × log2(36) ≈ 103 bits.
const generatedIDLength = 20

// maxIDAttempts bounds the retries of a generated id that collides (never seen in practice).
const maxIDAttempts = 5

// Reconciler assigns each Connection its public id, once.
type Reconciler struct {
	// Client reads through the manager's cache (with IDIndex) and writes status.
	Client client.Client
	// ControllerOptions tune the controller (tests skip the name validation).
	ControllerOptions crcontroller.Options
	// NewID generates an id (default GenerateID); tests make it collide.
	NewID func() (string, error)
}

// +kubebuilder:rbac:groups=switchboard.dev,resources=connections,verbs=get;list;watch
// +kubebuilder:rbac:groups=switchboard.dev,resources=connections/status,verbs=patch

// SetupWithManager indexes Connections by id and registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &switchboardv1alpha1.Connection{}, IDIndex, connectionIDs); err != nil {
		return fmt.Errorf("indexing Connections by id: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&switchboardv1alpha1.Connection{}, builder.WithPredicates(controller.MeaningfulUpdate)).
		// A Connection that gives up an id (deleted) lets a conflicting one of its namespace take it.
		Watches(&switchboardv1alpha1.Connection{}, handler.EnqueueRequestsFromMapFunc(r.sameID), builder.WithPredicates(controller.MeaningfulUpdate)).
		Named("connection").
		WithOptions(fairqueue.ControllerOptions(r.ControllerOptions)).
		Complete(r)
}

// sameID maps a Connection to the other Connections of its namespace that want one of its ids.
func (r *Reconciler) sameID(ctx context.Context, obj client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, key := range connectionIDs(obj) {
		var list switchboardv1alpha1.ConnectionList
		if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{IDIndex: key}); err != nil {
			log.FromContext(ctx).Error(err, "listing Connections by id", "id", key)
			continue
		}
		for _, o := range list.Items {
			if o.UID != obj.GetUID() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&o)})
			}
		}
	}
	return reqs
}

// connectionIDs is the index function of IDIndex: the Connection's ids, each with its
// namespace (idIndexKey).
func connectionIDs(obj client.Object) []string {
	conn, ok := obj.(*switchboardv1alpha1.Connection)
	if !ok {
		return nil
	}
	var keys []string
	for _, id := range []string{conn.Status.ID, conn.Spec.ID} {
		if key := idIndexKey(conn.Namespace, id); id != "" && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys
}

// Reconcile gives the Connection its id and patches the status once, at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	conn := &switchboardv1alpha1.Connection{}
	if err := r.Client.Get(ctx, req.NamespacedName, conn); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !conn.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := conn.DeepCopy()
	found := &connectionFindings{}
	defer func() {
		setConnectionConditions(conn, found)
		if retErr == nil {
			// Only a reconcile that ran to its end has seen this generation of the spec.
			conn.Status.ObservedGeneration = conn.Generation
		}
		if err := objstatus.Patch(ctx, r.Client, before, conn); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()
	return ctrl.Result{}, r.reconcile(ctx, conn, found)
}

// reconcile gives conn its id, once, and notes in found a better claim to it by another one of
// its namespace.
func (r *Reconciler) reconcile(ctx context.Context, conn *switchboardv1alpha1.Connection, found *connectionFindings) error {
	// An assigned id is kept forever, even when a later object claims the same spec.id.
	for _, id := range []string{conn.Status.ID, conn.Spec.ID} {
		if id == "" {
			continue
		}
		other, err := r.outrankedBy(ctx, conn, id)
		if err != nil {
			return err
		}
		if other != nil {
			found.conflictID, found.holder = id, other
			return nil
		}
		conn.Status.ID = id
		return nil
	}
	newID := r.NewID
	if newID == nil {
		newID = GenerateID
	}
	for range maxIDAttempts {
		id, err := newID()
		if err != nil {
			return err
		}
		used, err := r.idUsed(ctx, conn, id)
		if err != nil {
			return err
		}
		if !used {
			conn.Status.ID = id
			log.FromContext(ctx).Info("assigned connection id", "id", id)
			return nil
		}
	}
	return errors.New("could not generate an unused connection id")
}

// holders lists the other Connections of conn's namespace that use id, in spec or status.
// Connections of other namespaces never count: ids are unique per namespace.
func (r *Reconciler) holders(ctx context.Context, conn *switchboardv1alpha1.Connection, id string) ([]switchboardv1alpha1.Connection, error) {
	var list switchboardv1alpha1.ConnectionList
	if err := r.Client.List(ctx, &list, client.InNamespace(conn.Namespace), client.MatchingFields{IDIndex: idIndexKey(conn.Namespace, id)}); err != nil {
		return nil, fmt.Errorf("listing Connections with id %s: %w", id, err)
	}
	others := list.Items[:0]
	for _, o := range list.Items {
		if o.UID != conn.UID {
			others = append(others, o)
		}
	}
	return others, nil
}

func (r *Reconciler) idUsed(ctx context.Context, conn *switchboardv1alpha1.Connection, id string) (bool, error) {
	others, err := r.holders(ctx, conn, id)
	return len(others) > 0, err
}

// outrankedBy returns the Connection that has a better claim to id than conn, if any: one that
// already holds it in status while conn does not, or else the older one (then by name).
func (r *Reconciler) outrankedBy(ctx context.Context, conn *switchboardv1alpha1.Connection, id string) (*switchboardv1alpha1.Connection, error) {
	others, err := r.holders(ctx, conn, id)
	if err != nil {
		return nil, err
	}
	for i := range others {
		if outranks(&others[i], conn, id) {
			return &others[i], nil
		}
	}
	return nil, nil
}

// outranks reports whether a has a better claim to id than b.
func outranks(a, b *switchboardv1alpha1.Connection, id string) bool {
	aHolds, bHolds := a.Status.ID == id, b.Status.ID == id
	if aHolds != bHolds {
		return aHolds
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// GenerateID returns "conn_" and 20 random lower-case base36 characters from crypto/rand.
func GenerateID() (string, error) {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	buf := make([]byte, 0, len(switchboardv1alpha1.ConnectionIDPrefix)+generatedIDLength)
	buf = append(buf, switchboardv1alpha1.ConnectionIDPrefix...)
	limit := big.NewInt(int64(len(alphabet)))
	for range generatedIDLength {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return "", fmt.Errorf("reading random bytes for a connection id: %w", err)
		}
		buf = append(buf, alphabet[n.Int64()])
	}
	return string(buf), nil
}
