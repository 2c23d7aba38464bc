package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The record of issuance: what the operator decides a key's issue from. The hash Secret, in the
// system namespace that neither tenants nor the server can write, records the generation it
// hashes, that key's hint and the rotation it carried out. The status mirrors them for people
// and clients, but whoever may patch apikeys/status (the server's identity, for lastUsedAt) can
// rewrite it: the operator never issues a key because the status says so while a hash Secret
// says otherwise, and puts such a status back.

// keyAction is what the record of issuance asks of a reconcile.
type keyAction int

const (
	// keepKey: the issued key stands and the status says so.
	keepKey keyAction = iota
	// issueKey: issue the next generation, the first key or a rotation not yet carried out.
	issueKey
	// publishKey: the status does not say what the hash Secret records; put it back.
	publishKey
)

// planKey decides from rec, the record of the hash Secret (nil when there is none), what key
// generation the APIKey should have and what to do about it. Without a hash Secret no key of
// this APIKey authenticates, so a forged status cannot end one: the status is all there is to
// go by (a first key, or the rotation that replaces a hash deleted by hand).
func planKey(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued) (keyAction, int64) {
	rotating := key.Spec.Rotation != nil
	requested := ""
	if rotating {
		requested = key.Spec.Rotation.RequestedAt
	}
	if rec == nil {
		gen := max(key.Status.KeyGeneration, 0)
		if gen == 0 || rotating && requested != key.Status.LastHandledRotationAt {
			return issueKey, gen + 1
		}
		return keepKey, gen
	}
	if rotating && requested != rec.RotationHandled {
		return issueKey, rec.Generation + 1
	}
	if key.Status.KeyGeneration != rec.Generation || key.Status.KeyHint != rec.Hint ||
		key.Status.LastHandledRotationAt != rec.RotationHandled {
		return publishKey, rec.Generation
	}
	return keepKey, rec.Generation
}

// issuedRecord is the record of issuance of hash Secret hash (nil: none). A hash Secret written
// before switchboard kept the record has only its generation: the rest is taken from the
// status until reconcileHash writes it down.
func issuedRecord(key *switchboardv1alpha1.APIKey, hash *corev1.Secret) *keysecret.Issued {
	if hash == nil || keysecret.Generation(hash) == 0 {
		return nil
	}
	if rec, ok := keysecret.IssuedOf(hash); ok {
		return &rec
	}
	// No reveal deadline: revealDeadline bounds the status's.
	return &keysecret.Issued{Generation: keysecret.Generation(hash), Hint: key.Status.KeyHint, RotationHandled: key.Status.LastHandledRotationAt}
}

// revealDeadline is when the unclaimed reveal of the recorded key generation is deleted: the
// deadline its hash Secret records (rec), never the status's, which whoever may patch
// apikeys/status could move. A hash Secret written before switchboard recorded deadlines has
// none: then the status's deadline counts, but never later than RevealTTL from now, and
// completeRecord writes it down so that it stops moving.
func (r *APIKeyReconciler) revealDeadline(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, now time.Time) time.Time {
	if rec != nil && !rec.RevealExpiresAt.IsZero() {
		return rec.RevealExpiresAt
	}
	limit := timePtr(now.Add(r.RevealTTL)).Time
	if d := key.Status.RevealExpiresAt; d != nil && d.Time.Before(limit) {
		return d.Time
	}
	return limit
}

// revealPending says the status publishes a reveal Secret nobody has claimed yet (followed even
// after spec.secretName was set: delivery starts with the next key).
func revealPending(key *switchboardv1alpha1.APIKey) bool {
	return key.Status.RevealSecretName != ""
}

// cachedHash reads the APIKey's hash Secret from the cache; nil when the cache has none.
func (r *APIKeyReconciler) cachedHash(ctx context.Context, key *switchboardv1alpha1.APIKey) (*corev1.Secret, error) {
	hash, err := r.cachedSecret(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the hash Secret: %w", err)
	}
	return hash, nil
}

// liveHash reads the APIKey's hash Secret from the API server; nil when there is none.
func (r *APIKeyReconciler) liveHash(ctx context.Context, key *switchboardv1alpha1.APIKey) (*corev1.Secret, error) {
	hash := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)}, hash)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading hash Secret %s/%s: %w", r.SystemNamespace, keysecret.HashName(key.UID), err)
	}
	return hash, nil
}

// sameVersion reports whether two reads of one Secret (nil: absent) saw the same version.
func sameVersion(a, b *corev1.Secret) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.ResourceVersion == b.ResourceVersion
}

// publish puts the status back in line with the hash Secret's record: an issue interrupted
// before its status patch, or a status someone else rewrote. It writes no Secret: the key the
// hash Secret hashes stays the key.
func (r *APIKeyReconciler) publish(ctx context.Context, key *switchboardv1alpha1.APIKey, now time.Time, found *keyFindings) (ctrl.Result, error) {
	// The cache may be behind our own last status patch, or our last hash write: decide from
	// the source, and let a later reconcile act if either moved.
	source := &switchboardv1alpha1.APIKey{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(key), source); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if source.ResourceVersion != key.ResourceVersion {
		found.stale = true
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	hash, err := r.liveHash(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	rec := issuedRecord(key, hash)
	if action, _ := planKey(key, rec); action != publishKey {
		found.stale = true
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	gen, published := rec.Generation, key.Status.KeyGeneration
	log.FromContext(ctx).Info("the status does not say what the hash Secret records; restoring it",
		"keyGeneration", published, "recordedGeneration", gen, "hint", rec.Hint)
	key.Status.KeyGeneration, key.Status.KeyHint, key.Status.LastHandledRotationAt = gen, rec.Hint, rec.RotationHandled
	key.Status.PreviousKeyValidUntil = previousValidUntil(hash)
	if key.Status.CreatedAt == nil {
		key.Status.CreatedAt = timePtr(now)
	}
	found.hash = hashFound
	found.restored = true
	if published == gen {
		return ctrl.Result{}, nil
	}
	// A generation the status never showed: an issue that stopped after writing the hash, or a
	// status rewritten to another generation. Whether the key Secret of gen still holds the
	// key says which: then this finishes the issue.
	var holder *corev1.Secret
	name := key.Spec.SecretName
	component := keysecret.ComponentDelivery
	if name == "" {
		name, component = keysecret.RevealName(key.Name, gen), keysecret.ComponentReveal
	}
	holder, err = r.getSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name})
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading Secret %s/%s: %w", key.Namespace, name, err)
	}
	holds := err == nil && keysecret.IsOwnedBy(holder, key, component) && keysecret.Generation(holder) == gen
	if holds && published < gen {
		found.restored, found.issued = false, true
		if gen > 1 {
			key.Status.RotatedAt = timePtr(now)
		}
	}
	switch {
	case key.Spec.SecretName != "":
		// A Secret that no longer holds gen is redelivered by the next reconcile (deliveryLost).
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		found.reveal = switchboardv1alpha1.ReasonDelivered
	case holds:
		if published != gen {
			// The status's deadline, if any, was another generation's.
			key.Status.RevealExpiresAt = nil
		}
		key.Status.RevealSecretName = name
		key.Status.RevealExpiresAt = timePtr(r.revealDeadline(key, rec, now))
		found.reveal = switchboardv1alpha1.ReasonRevealPending
	default:
		// Someone took the reveal Secret of gen: that is a claim.
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		found.reveal = switchboardv1alpha1.ReasonRevealClaimed
	}
	return ctrl.Result{}, nil
}
