package apikey

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// LeakReportReconciler writes what became of a LeakReport of the system namespace: the APIKey
// whose key it names (status.keyRef) and whether that key is refused (Ready). The APIKey
// reconciler does the acting; this one only reports, from the hash Secrets.
type LeakReportReconciler struct {
	// Client reads through the cache and writes LeakReports' status.
	Client client.Client
	// SystemNamespace is the one namespace whose LeakReports are believed.
	SystemNamespace string
	// ControllerOptions tune the controller (tests skip the name validation).
	ControllerOptions crcontroller.Options
}

// SetupWithManager registers the reconciler: LeakReports of the system namespace, and the hash
// Secrets whose hashes name them.
func (r *LeakReportReconciler) SetupWithManager(mgr manager.Manager) error {
	inSystem := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.SystemNamespace })
	isHash := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.SystemNamespace && o.GetLabels()[keysecret.LabelComponent] == keysecret.ComponentHash
	})
	return ctrl.ControllerManagedBy(mgr).
		For(&switchboardv1alpha1.LeakReport{}, ctrl.WithPredicates(inSystem)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.hashSecretToReports), ctrl.WithPredicates(isHash, controller.MeaningfulUpdate)).
		Named("leakreport").
		WithOptions(r.ControllerOptions).
		Complete(r)
}

// hashSecretToReports maps a hash Secret to the LeakReports its hashes would have (most do not
// exist: a Get from the cache says so at no cost).
func (r *LeakReportReconciler) hashSecretToReports(_ context.Context, o client.Object) []reconcile.Request {
	s, ok := o.(*corev1.Secret)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, sum := range keysecret.HashesOf(s) {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.SystemNamespace, Name: switchboardv1alpha1.LeakReportName(sum)}})
	}
	return out
}

// Reconcile reports on one LeakReport: KeyNotFound when no hash Secret knows its hash, Acting
// while the key's hash Secret does not record it refused yet, KeyRefused once it does (final:
// a later leak of the same APIKey replaces the record, not this report's outcome).
func (r *LeakReportReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != r.SystemNamespace {
		return reconcile.Result{}, nil
	}
	report := &switchboardv1alpha1.LeakReport{}
	if err := r.Client.Get(ctx, req.NamespacedName, report); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !isLeakReport(report, r.SystemNamespace) {
		return reconcile.Result{}, nil
	}
	if controller.ConditionReason(report.Status.Conditions, switchboardv1alpha1.ConditionReady) == switchboardv1alpha1.ReasonLeakActedOn {
		return reconcile.Result{}, nil
	}
	before := report.DeepCopy()
	ref, acted, err := r.keyOf(ctx, report.Spec.KeyHash)
	if err != nil {
		return reconcile.Result{}, err
	}
	set := func(status metav1.ConditionStatus, reason, message string) {
		controller.SetCondition(&report.Status.Conditions, report.Generation, switchboardv1alpha1.ConditionReady, status, reason, message)
	}
	report.Status.KeyRef = ref
	switch {
	case ref == nil:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonKeyNotFound,
			"no key switchboard holds has this hash: it was never issued here, or it was replaced and its hash dropped already, so it is refused anyway")
	case acted:
		set(metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakActedOn,
			fmt.Sprintf("the key of APIKey %s/%s is refused (see its Leaked condition)", ref.Namespace, ref.Name))
	default:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonLeakActing,
			fmt.Sprintf("refusing the key of APIKey %s/%s", ref.Namespace, ref.Name))
	}
	report.Status.ObservedGeneration = report.Generation
	return reconcile.Result{}, controller.PatchStatus(ctx, r.Client, before, report)
}

// keyOf finds the APIKey whose hash Secret knows sum, by the hash Secret's name and UID label
// (the system namespace's, which tenants cannot write) and the APIKey of that UID; acted says
// the hash Secret records the key refused (for this leak, or revoked altogether).
func (r *LeakReportReconciler) keyOf(ctx context.Context, sum string) (*switchboardv1alpha1.LeakedKeyReference, bool, error) {
	var hashes corev1.SecretList
	if err := r.Client.List(ctx, &hashes, client.InNamespace(r.SystemNamespace), client.MatchingFields{LeakHashIndex: sum}); err != nil {
		return nil, false, fmt.Errorf("listing hash Secrets by hash: %w", err)
	}
	for i := range hashes.Items {
		h := &hashes.Items[i]
		uid := types.UID(h.Labels[keysecret.LabelAPIKeyUID])
		if uid == "" || h.Name != keysecret.HashName(uid) {
			continue
		}
		key := &switchboardv1alpha1.APIKey{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: h.Labels[keysecret.LabelAPIKeyNamespace], Name: h.Labels[keysecret.LabelAPIKeyName]}, key)
		if client.IgnoreNotFound(err) != nil {
			return nil, false, fmt.Errorf("reading the APIKey of hash Secret %s: %w", h.Name, err)
		}
		if err != nil || key.UID != uid {
			continue
		}
		leak, _ := keysecret.LeakOf(h)
		rec, _ := keysecret.IssuedOf(h)
		acted := leak.Hash == sum || rec.Revoked()
		return &switchboardv1alpha1.LeakedKeyReference{Namespace: key.Namespace, Name: key.Name, UID: string(key.UID)}, acted, nil
	}
	return nil, false, nil
}
