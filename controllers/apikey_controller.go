package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	"github.com/switchboard-dev/switchboard/internal/apikey"
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
	return ctrl.NewControllerManagedBy(mgr).
		For(&switchboardv1alpha1.APIKey{}).
		Owns(&corev1.Secret{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(hashSecretToAPIKey), builder.WithPredicates(isHash)).
		Named("apikey").
		WithOptions(r.ControllerOptions).
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
	if err := r.Client.Get(ctx, req.NamespacedName, key); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
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
	defer func() {
		key.Status.ObservedGeneration = key.Generation
		if err := r.patchStatus(ctx, before, key); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()
	return r.reconcile(ctx, key, live)
}

// patchStatus patches the status when it changed. The optimistic lock makes a reconcile that
// worked from a stale object fail instead of publishing a key generation twice; the merge
// patch leaves lastUsedAt, which the API server writes, alone.
func (r *APIKeyReconciler) patchStatus(ctx context.Context, before, key *switchboardv1alpha1.APIKey) error {
	if equality.Semantic.DeepEqual(before.Status, key.Status) {
		return nil
	}
	err := r.Client.Status().Patch(ctx, key, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patching the status of APIKey %s/%s: %w", key.Namespace, key.Name, err)
	}
	return nil
}

// reconcile brings key's Secrets and status in line with its spec; live says key came from the
// API server rather than the cache.
func (r *APIKeyReconciler) reconcile(ctx context.Context, key *switchboardv1alpha1.APIKey, live bool) (ctrl.Result, error) {
	now := r.Clock.Now()
	key.Status.ExpiresAt = key.Spec.ExpiresAt.DeepCopy()
	if key.Spec.Revoked || key.Status.RevokedAt != nil {
		// Once seen revoked, always revoked: whatever later happens to the spec, the status
		// record keeps the operator from ever issuing a key for this APIKey again.
		return ctrl.Result{}, r.reconcileRevoked(ctx, key, now)
	}
	expired := key.Spec.ExpiresAt != nil && !now.Before(key.Spec.ExpiresAt.Time)
	if expired {
		// An expired key is refused by the server; issuing or rotating it would be pointless.
		r.setReadyExpired(key)
		if key.Status.KeyGeneration == 0 {
			return ctrl.Result{}, nil
		}
	} else if needsKey(key) {
		return r.issue(ctx, key, live, now, gracePeriod(key))
	} else if lost, err := r.deliveryLost(ctx, key); err != nil {
		return ctrl.Result{}, err
	} else if lost {
		// Like cert-manager with a deleted certificate Secret: issue anew into it. Pods that
		// still hold the old key keep working for a while.
		lostHint, lostGen := key.Status.KeyHint, key.Status.KeyGeneration
		res, err := r.issue(ctx, key, live, now, RedeliveryGrace)
		if err == nil && key.Status.KeyGeneration > lostGen {
			r.event(key, corev1.EventTypeWarning, ReasonDeliverySecretLost, "RedeliverKey",
				"Secret %s no longer held key %s; issued key %s into it, the old one stays valid for %s",
				key.Spec.SecretName, lostHint, key.Status.KeyHint, RedeliveryGrace)
		}
		return res, err
	}

	var next requeue
	after, hashFound, err := r.reconcileHash(ctx, key, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	next.at(after)
	after, err = r.reconcileReveal(ctx, key, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	next.at(after)
	if err := r.sweepRevealSecrets(ctx, key, key.Status.KeyGeneration); err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case expired:
	case !hashFound:
		setReadyHashMissing(key, r.SystemNamespace)
	default:
		setReadyKeyIssued(key)
		if key.Spec.ExpiresAt != nil {
			next.at(key.Spec.ExpiresAt.Sub(now))
		}
	}
	return next.result(), nil
}

// needsKey reports whether the APIKey wants a new key: its first, or a rotation not yet handled.
func needsKey(key *switchboardv1alpha1.APIKey) bool {
	if key.Status.KeyGeneration == 0 {
		return true
	}
	return key.Spec.Rotation != nil && key.Spec.Rotation.RequestedAt != key.Status.LastHandledRotationAt
}

// issue issues key generation N+1 in the protocol's order: (1) the reveal or delivery Secret
// with the plaintext, (2) the hash Secret from that plaintext, (3) the status that publishes it.
// Each step accepts the work of an interrupted earlier run as done. The key it replaces, if
// any, stays valid for grace.
func (r *APIKeyReconciler) issue(ctx context.Context, key *switchboardv1alpha1.APIKey, live bool, now time.Time, grace time.Duration) (ctrl.Result, error) {
	if !live {
		// A cache that has not seen our last status would make us mint a second key for a
		// generation that is already published: check the status at the source.
		source := &switchboardv1alpha1.APIKey{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(key), source); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if source.Status.KeyGeneration != key.Status.KeyGeneration || source.Status.LastHandledRotationAt != key.Status.LastHandledRotationAt {
			return ctrl.Result{RequeueAfter: staleRetry}, nil
		}
	}
	gen := key.Status.KeyGeneration + 1
	setReadyIssuing(key, gen)

	plaintext, err := r.ensureKeySecret(ctx, key, gen)
	var conflict *conflictError
	if errors.As(err, &conflict) {
		setReadyDeliveryConflict(key, conflict.Error())
		r.event(key, corev1.EventTypeWarning, switchboardv1alpha1.ReasonDeliveryConflict, "DeliverKey", conflict.Error())
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	hash, err := r.ensureHash(ctx, key, gen, plaintext, now, grace)
	if err != nil {
		return ctrl.Result{}, err
	}

	hint := apikey.Hint(plaintext)
	key.Status.KeyGeneration = gen
	key.Status.KeyHint = hint
	if key.Status.CreatedAt == nil {
		key.Status.CreatedAt = timePtr(now)
	}
	if gen > 1 {
		key.Status.RotatedAt = timePtr(now)
	}
	if key.Spec.Rotation != nil {
		key.Status.LastHandledRotationAt = key.Spec.Rotation.RequestedAt
	}
	key.Status.PreviousKeyValidUntil = previousValidUntil(hash)
	if key.Spec.SecretName != "" {
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		setRevealedDelivered(key)
	} else {
		key.Status.RevealSecretName = keysecret.RevealName(key.Name, gen)
		key.Status.RevealExpiresAt = timePtr(now.Add(r.RevealTTL))
		setRevealPending(key)
	}
	setReadyKeyIssued(key)
	if gen == 1 {
		r.event(key, corev1.EventTypeNormal, "KeyCreated", "IssueKey", "issued key %s", hint)
	} else {
		r.event(key, corev1.EventTypeNormal, "KeyRotated", "RotateKey", "rotated to key %s (generation %d)", hint, gen)
	}
	log.FromContext(ctx).Info("issued key", "hint", hint, "keyGeneration", gen)
	// The status patch wakes the next reconcile, which sweeps older reveal Secrets once the
	// new generation is published.
	return ctrl.Result{}, nil
}

// reconcileRevoked records that the key is revoked and removes the hash, so the server refuses
// the key, and any unclaimed reveal.
func (r *APIKeyReconciler) reconcileRevoked(ctx context.Context, key *switchboardv1alpha1.APIKey, now time.Time) error {
	if key.Status.RevokedAt == nil {
		key.Status.RevokedAt = timePtr(now)
	}
	if readyReason(key) == switchboardv1alpha1.ReasonRevoked {
		// A revocation already carried out (hash and reveal Secrets deleted): since then no
		// reconcile issued anything, so only a hash restored by hand, which the cache sees,
		// is left to delete. Settled revoked keys cost no API call.
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
		setRevealRevoked(key)
	}
	key.Status.PreviousKeyValidUntil = nil
	if readyReason(key) != switchboardv1alpha1.ReasonRevoked {
		r.event(key, corev1.EventTypeNormal, "KeyRevoked", "RevokeKey", "revoked key %s", hintOf(key))
	}
	setReadyRevoked(key)
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

// hintOf names the APIKey's key for people: its hint, or a word when none was issued.
func hintOf(key *switchboardv1alpha1.APIKey) string {
	if key.Status.KeyHint == "" {
		return "(none issued yet)"
	}
	return key.Status.KeyHint
}

// event records an Event about key. Callers pass the hint, never the key.
func (r *APIKeyReconciler) event(key *switchboardv1alpha1.APIKey, eventType, reason, action, note string, args ...any) {
	r.Recorder.Eventf(key, nil, eventType, reason, action, note, args...)
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
