package webhooksender

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/fairqueue"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// statusReconciler mirrors each KeyWebhook's record in its namespace's outbox into its status,
// and enables again an endpoint disabled by a 410 once its spec has changed.
type statusReconciler struct {
	client client.Client
	reader client.Reader
	system string
}

// setup registers the reconciler with mgr: on KeyWebhooks, and on outboxes (every KeyWebhook
// of the outbox's namespace).
func (r *statusReconciler) setup(mgr ctrl.Manager, opts crcontroller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&switchboardv1alpha1.KeyWebhook{}).
		Watches(&switchboardv1alpha1.WebhookOutbox{}, handler.EnqueueRequestsFromMapFunc(r.ofOutbox)).
		Named("keywebhook-status").
		WithOptions(fairqueue.ControllerOptions(opts)).
		Complete(r)
}

// ofOutbox maps an outbox to the KeyWebhooks of its namespace.
func (r *statusReconciler) ofOutbox(ctx context.Context, o client.Object) []reconcile.Request {
	ob, ok := o.(*switchboardv1alpha1.WebhookOutbox)
	if !ok || ob.Namespace != r.system || ob.Spec.Namespace == "" {
		return nil
	}
	var list switchboardv1alpha1.KeyWebhookList
	if err := r.client.List(ctx, &list, client.InNamespace(ob.Spec.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "listing KeyWebhooks", "namespace", ob.Spec.Namespace)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, kw := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: kw.Namespace, Name: kw.Name}})
	}
	return reqs
}

// Reconcile writes one KeyWebhook's status from its outbox record.
func (r *statusReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kw := &switchboardv1alpha1.KeyWebhook{}
	if err := r.client.Get(ctx, req.NamespacedName, kw); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	key := types.NamespacedName{Namespace: r.system, Name: switchboardv1alpha1.WebhookOutboxName(kw.Namespace)}
	ob := &switchboardv1alpha1.WebhookOutbox{}
	if err := r.client.Get(ctx, key, ob); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	uid := string(kw.UID)
	if st := findState(&ob.Spec, uid); st != nil && st.DisabledGeneration != 0 && st.DisabledGeneration != kw.Generation {
		// The tenant changed the subscription since its endpoint answered 410: send again.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fresh := &switchboardv1alpha1.WebhookOutbox{}
			if err := r.reader.Get(ctx, key, fresh); err != nil {
				return err
			}
			st := findState(&fresh.Spec, uid)
			if st == nil || st.DisabledGeneration == 0 || st.DisabledGeneration == kw.Generation {
				return nil
			}
			st.DisabledGeneration, st.LastError = 0, ""
			return r.client.Update(ctx, fresh)
		})
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("enabling the endpoint of KeyWebhook %s again: %w", req.NamespacedName, err)
		}
		return reconcile.Result{}, nil // the outbox's change brings this back
	}
	before := kw.DeepCopy()
	mirror(kw, &ob.Spec)
	return reconcile.Result{}, objstatus.Patch(ctx, r.client, before, kw)
}

// mirror sets kw's status from its record in its namespace's outbox spec: pending, dropped,
// lastDeliveryTime, and Ready for what deliveries found. A Ready the operator set for the
// subscription itself (InvalidEndpoint, SigningSecretMissing) is the operator's to lift.
func mirror(kw *switchboardv1alpha1.KeyWebhook, spec *switchboardv1alpha1.WebhookOutboxSpec) {
	uid := string(kw.UID)
	pending := int32(0)
	for _, m := range spec.Messages {
		if m.WebhookUID == uid {
			pending++
		}
	}
	kw.Status.Pending = pending
	st := findState(spec, uid)
	if st == nil {
		st = &switchboardv1alpha1.WebhookEndpointState{}
	}
	kw.Status.Dropped = st.Dropped
	kw.Status.LastDeliveryTime = st.LastDeliveryTime
	ready := meta.FindStatusCondition(kw.Status.Conditions, switchboardv1alpha1.ConditionReady)
	if ready != nil && (ready.Reason == switchboardv1alpha1.ReasonWebhookInvalidEndpoint || ready.Reason == switchboardv1alpha1.ReasonWebhookSecretMissing) {
		return
	}
	set := func(status metav1.ConditionStatus, reason, message string) {
		objstatus.SetCondition(&kw.Status.Conditions, kw.Generation, switchboardv1alpha1.ConditionReady, status, reason, message)
	}
	switch {
	case st.DisabledGeneration != 0 && st.DisabledGeneration == kw.Generation:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonWebhookGone,
			st.LastError+"; nothing is sent to it until the KeyWebhook's spec changes")
	case st.LastError != "":
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonWebhookFailing, "The last attempt failed: "+st.LastError)
	case ready == nil || ready.Reason != switchboardv1alpha1.ReasonWebhookActive:
		set(metav1.ConditionTrue, switchboardv1alpha1.ReasonWebhookActive, "Events are delivered as they happen.")
	}
}
