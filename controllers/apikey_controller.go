package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// conflictRetry is how often an APIKey whose delivery Secret is someone else's is looked at
// again: that Secret is not in the cache (it lacks switchboard's label), so no event wakes us.
const conflictRetry = time.Minute

// RedeliveryGrace is how long a delivered key stays valid after its delivery Secret was
// deleted and a new key was issued into the Secret again.
const RedeliveryGrace = time.Hour

// ReasonDeliverySecretLost is the Event reason of a delivery Secret that was deleted or lost
// its key; a new key is issued into it.
const ReasonDeliverySecretLost = "DeliverySecretLost"

// ReasonKeySecretReplaced is the Event reason of a reveal or delivery Secret whose key
// switchboard could not prove it issued (planted, or left unhashed by a crash): it was
// replaced by a fresh key.
const ReasonKeySecretReplaced = "KeySecretReplaced"

// ReasonStatusRestored is the Event reason of a status that did not say what the hash Secret
// records (keyGeneration, keyHint, lastHandledRotationAt) and was put back.
const ReasonStatusRestored = "StatusRestored"

// staleRetry is how soon a reconcile that found the cache behind the API server runs again.
const staleRetry = time.Second

// APIKeyReconciler turns APIKeys into hashed keys: it issues, reveals or delivers, rotates,
// expires and revokes them, following the write order of the key protocol so that any
// interrupted reconcile is finished by the next one.
type APIKeyReconciler struct {
	// Client reads through the cache and writes.
	Client client.Client
	// APIReader reads the API server directly, wherever a stale cache could cost a key.
	APIReader client.Reader
	// Recorder emits Events; they carry the key's hint, never the key.
	Recorder events.EventRecorder
	// Clock tells the time for expiry, grace periods and reveal deadlines.
	Clock clock.PassiveClock
	// SystemNamespace holds the hash Secrets.
	SystemNamespace string
	// KeyPrefix begins every key issued.
	KeyPrefix string
	// RevealTTL is how long an unclaimed reveal Secret lives.
	RevealTTL time.Duration
	// ControllerOptions tune the controller (tests skip the name validation).
	ControllerOptions controller.Options

	// hashOwnerIndexed says SetupWithManager indexed the cache by HashOwnerIndex.
	hashOwnerIndexed bool
}

// SetupWithManager registers the reconciler with mgr. Reveal and delivery Secrets are owned by
// their APIKey; hash Secrets live in another namespace and are mapped back by their labels.
func (r *APIKeyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.APIReader == nil || r.Recorder == nil || r.Clock == nil {
		return errors.New("APIKeyReconciler needs a Client, an APIReader, a Recorder and a Clock")
	}
	if r.SystemNamespace == "" || r.KeyPrefix == "" || r.RevealTTL <= 0 {
		return errors.New("APIKeyReconciler needs a SystemNamespace, a KeyPrefix and a positive RevealTTL")
	}
	isHash := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.SystemNamespace &&
			o.GetLabels()[keysecret.LabelComponent] == keysecret.ComponentHash
	})
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Secret{}, HashOwnerIndex, hashOwner(r.SystemNamespace)); err != nil {
		return fmt.Errorf("indexing hash Secrets: %w", err)
	}
	r.hashOwnerIndexed = true
	return ctrl.NewControllerManagedBy(mgr).
		For(&switchboardv1alpha1.APIKey{}, builder.WithPredicates(meaningfulUpdate)).
		Owns(&corev1.Secret{}, builder.WithPredicates(meaningfulUpdate)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(hashSecretToAPIKey), builder.WithPredicates(isHash, meaningfulUpdate)).
		Named("apikey").
		WithOptions(fairOptions(r.ControllerOptions)).
		Complete(r)
}

// hashSecretToAPIKey maps a hash Secret to the APIKey its labels name.
func hashSecretToAPIKey(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	ns, name := l[keysecret.LabelAPIKeyNamespace], l[keysecret.LabelAPIKeyName]
	if ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// Reconcile fetches the APIKey, makes sure of the finalizer, and reconciles it, patching the
// status once at the end.
func (r *APIKeyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	key := &switchboardv1alpha1.APIKey{}
	if err := r.Client.Get(ctx, req.NamespacedName, key); apierrors.IsNotFound(err) {
		// Gone without its finalizer having run (removed by whoever may patch APIKeys): its
		// hash Secret would stay for good.
		return ctrl.Result{}, r.deleteOrphanHashes(ctx, req.NamespacedName, "")
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.deleteOrphanHashes(ctx, req.NamespacedName, key.UID); err != nil {
		return ctrl.Result{}, err
	}
	if !key.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, key)
	}
	// live is true when key is the API server's answer to a write, not a cache read.
	live := false
	if !controllerutil.ContainsFinalizer(key, switchboardv1alpha1.FinalizerAPIKey) {
		// The finalizer goes on before any hash exists, so no hash can outlive its APIKey.
		before := key.DeepCopy()
		controllerutil.AddFinalizer(key, switchboardv1alpha1.FinalizerAPIKey)
		if err := r.Client.Patch(ctx, key, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
		live = true
	}
	before := key.DeepCopy()
	found := &keyFindings{}
	defer func() {
		if found.stale {
			return
		}
		setKeyConditions(key, found, r.SystemNamespace)
		if retErr == nil {
			// Only a reconcile that ran to its end has seen this generation of the spec.
			key.Status.ObservedGeneration = key.Generation
		}
		if err := patchStatus(ctx, r.Client, before, key); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
			return
		}
		r.recordTransitions(before, key, found)
	}()
	return r.reconcile(ctx, key, live, found)
}

// reconcile brings key's Secrets and status in line with its spec, and notes in found what it
// found; live says key came from the API server rather than the cache.
func (r *APIKeyReconciler) reconcile(ctx context.Context, key *switchboardv1alpha1.APIKey, live bool, found *keyFindings) (ctrl.Result, error) {
	now := r.Clock.Now()
	key.Status.ExpiresAt = key.Spec.ExpiresAt.DeepCopy()
	if key.Spec.Revoked {
		// The API server keeps spec.revoked true for good (a rule on the whole APIKey), so the
		// spec alone decides: status.revokedAt only records when the operator saw it.
		found.revoked = true
		return ctrl.Result{}, r.reconcileRevoked(ctx, key, now, found)
	}
	if key.Status.RevokedAt != nil {
		// Written by someone else (the API server refuses it on a key not revoked since issue
		// 18, so it is older than that): the key is not revoked, and the status says so again.
		log.FromContext(ctx).Info("status.revokedAt is set but spec.revoked is not; the key is not revoked, restoring the status")
		key.Status.RevokedAt = nil
		found.restored = true
	}
	found.expired = key.Spec.ExpiresAt != nil && !now.Before(key.Spec.ExpiresAt.Time)
	hash, err := r.cachedHash(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	rec := issuedRecord(key, hash)
	action, gen := planKey(key, rec)
	switch {
	case action == publishKey:
		return r.publish(ctx, key, now, found)
	case found.expired:
		// An expired key is refused by the server; issuing or rotating it would be pointless.
		if action == issueKey && gen == 1 {
			return ctrl.Result{}, nil
		}
	case action == issueKey:
		return r.issue(ctx, key, live, hash, gen, now, gracePeriod(key), found)
	default:
		lost, conflict, err := r.deliveryLost(ctx, key)
		if err != nil {
			return ctrl.Result{}, err
		}
		// The issued key keeps working; Ready says it is not where the spec says (the Secret
		// is not cached, so only time brings the next look).
		found.conflict = conflict
		if lost {
			// Like cert-manager with a deleted certificate Secret: issue anew into it. Pods
			// that still hold the old key keep working for a while.
			found.lostHint = key.Status.KeyHint
			return r.issue(ctx, key, live, hash, gen+1, now, RedeliveryGrace, found)
		}
	}

	var next requeue
	if found.conflict != "" {
		next.at(conflictRetry)
	}
	after, err := r.reconcileHash(ctx, key, now, found)
	if err != nil {
		return ctrl.Result{}, err
	}
	next.at(after)
	after, err = r.reconcileReveal(ctx, key, rec, now, found)
	if err != nil {
		return ctrl.Result{}, err
	}
	next.at(after)
	if err := r.sweepRevealSecrets(ctx, key, key.Status.KeyGeneration); err != nil {
		return ctrl.Result{}, err
	}
	if !found.expired && found.hash == hashFound && key.Spec.ExpiresAt != nil {
		next.at(key.Spec.ExpiresAt.Sub(now))
	}
	return next.result(), nil
}

// reconcileRevoked records that the key is revoked and removes the hash, so the server refuses
// the key, and any unclaimed reveal.
func (r *APIKeyReconciler) reconcileRevoked(ctx context.Context, key *switchboardv1alpha1.APIKey, now time.Time, found *keyFindings) error {
	if key.Status.RevokedAt == nil {
		key.Status.RevokedAt = timePtr(now)
	}
	if conditionReason(key.Status.Conditions, switchboardv1alpha1.ConditionReady) == switchboardv1alpha1.ReasonRevoked &&
		key.Status.ObservedGeneration == key.Generation && key.Status.RevealSecretName == "" {
		// A revocation already carried out (hash and reveal Secrets deleted): since then no
		// reconcile issued anything, so only a hash restored by hand, which the cache sees,
		// is left to delete. Settled revoked keys cost no API call. Ready says Revoked as
		// soon as a revocation is seen, even when its clean-up failed; such a reconcile left
		// observedGeneration behind (or the reveal published), so the clean-up runs again.
		if _, err := r.cachedSecret(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)}); apierrors.IsNotFound(err) {
			return nil
		}
	}
	if err := r.deleteHash(ctx, key); err != nil {
		return err
	}
	if err := r.sweepRevealSecrets(ctx, key, -1); err != nil {
		return err
	}
	if key.Status.RevealSecretName != "" {
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		found.reveal = switchboardv1alpha1.ReasonRevoked
	}
	key.Status.PreviousKeyValidUntil = nil
	return nil
}

// reconcileDelete removes the hash Secret and any reveal Secret, then the finalizer.
func (r *APIKeyReconciler) reconcileDelete(ctx context.Context, key *switchboardv1alpha1.APIKey) error {
	if !controllerutil.ContainsFinalizer(key, switchboardv1alpha1.FinalizerAPIKey) {
		return nil
	}
	if err := r.deleteHash(ctx, key); err != nil {
		return err
	}
	// Owner references would collect them too, but the plaintext should not wait for the
	// garbage collector.
	if err := r.sweepRevealSecrets(ctx, key, -1); err != nil {
		return err
	}
	before := key.DeepCopy()
	controllerutil.RemoveFinalizer(key, switchboardv1alpha1.FinalizerAPIKey)
	if err := r.Client.Patch(ctx, key, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("deleted the key's hash", "hint", key.Status.KeyHint)
	return nil
}

// requeue keeps the soonest of several wake-up delays.
type requeue struct{ after time.Duration }

// at asks to run again after d (d <= 0 means no request).
func (q *requeue) at(d time.Duration) {
	if d <= 0 {
		return
	}
	if q.after == 0 || d < q.after {
		q.after = d
	}
}

func (q *requeue) result() ctrl.Result { return ctrl.Result{RequeueAfter: q.after} }
