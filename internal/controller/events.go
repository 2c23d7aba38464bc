package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/creditalerts"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/misusealerts"
)

// What wakes a reconcile. A tenant may update its objects as often as it likes; an update that
// changes nothing the reconcilers act on must cost nothing, or one tenant re-annotating its
// objects keeps the operator busy for everyone. And the queue takes namespaces in turn
// (internal/fairqueue), so whatever a tenant does enqueue waits behind its own work, not in
// front of others'.

// MeaningfulUpdate lets through the updates of APIKeys, Connections and Secrets that change
// something the reconcilers read: the spec (generation), deletion, finalizers, owner references,
// the status the operator writes (but an APIKey's lastUsedAt and previousKeyUse, which the server
// writes: the decisions that read them wake on a timer; and its credits and binding, also the
// server's, unless they cross a threshold of the credit events or start a period, or carry a
// misuse to report), and a Secret's type, switchboard's labels and its data. Labels and annotations
// that switchboard does not own, managed fields and the resource version do not count. Creates
// and deletes always count.
var MeaningfulUpdate = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return true
	}
	o, n := e.ObjectOld, e.ObjectNew
	if o.GetGeneration() != n.GetGeneration() || !o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
		!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
		!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) {
		return true
	}
	switch old := o.(type) {
	case *switchboardv1alpha1.APIKey:
		n, ok := n.(*switchboardv1alpha1.APIKey)
		if !ok {
			return true
		}
		a, b := old.Status, n.Status
		a.LastUsedAt, b.LastUsedAt = nil, nil
		a.PreviousKeyUse, b.PreviousKeyUse = nil, nil
		// status.credits changes at every write of the server; only a balance that moves the
		// credit events' record (a threshold, a new period) needs the operator.
		a.Credits, b.Credits = nil, nil
		// So does status.binding: only a misuse to report now needs the operator (those of an
		// interval not over wait for its wake).
		a.Binding, b.Binding = nil, nil
		return !equality.Semantic.DeepEqual(a, b) || creditalerts.Due(n.Status.CreditAlerts, n.Status.Credits) ||
			misusealerts.Due(n.Status.MisuseAlerts, n.Status.Binding)
	case *switchboardv1alpha1.Connection:
		n, ok := n.(*switchboardv1alpha1.Connection)
		return !ok || !equality.Semantic.DeepEqual(old.Status, n.Status)
	case *corev1.Secret:
		// The operator's cache keeps of a tenant's Secret only switchboard's labels (trimSecret
		// in internal/operator), so a change of the others never reaches here as a difference.
		n, ok := n.(*corev1.Secret)
		return !ok || old.Type != n.Type || !equality.Semantic.DeepEqual(old.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(old.Data, n.Data)
	}
	return true
}}
