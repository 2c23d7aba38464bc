package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The hash Secret: the record of issuance in the system namespace, the only thing the server
// authenticates against.

// reconcileHash keeps the hash Secret of an issued key: it drops the previous key's hash once
// its grace period ends, and asks to run again at that instant. It notes in found whether the
// hash Secret is there: one deleted by hand leaves the key refused.
func (r *APIKeyReconciler) reconcileHash(ctx context.Context, key *switchboardv1alpha1.APIKey, now time.Time, found *keyFindings) (time.Duration, error) {
	hash, err := r.getSecret(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)})
	if apierrors.IsNotFound(err) {
		found.hash = hashMissing
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the hash Secret: %w", err)
	}
	if g := keysecret.Generation(hash); g < key.Status.KeyGeneration {
		// The cache has not caught up with the rotation we just made.
		hash = &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)}, hash); err != nil {
			if apierrors.IsNotFound(err) {
				found.hash = hashMissing
				return 0, nil
			}
			return 0, err
		}
		if keysecret.Generation(hash) < key.Status.KeyGeneration {
			return 0, fmt.Errorf("hash Secret %s/%s hashes key generation %d, status says %d",
				r.SystemNamespace, hash.Name, keysecret.Generation(hash), key.Status.KeyGeneration)
		}
	}
	found.hash = hashFound
	if err := r.completeRecord(ctx, key, hash, now); err != nil {
		return 0, err
	}
	validUntil := previousValidUntil(hash)
	if validUntil == nil {
		key.Status.PreviousKeyValidUntil = nil
		return 0, nil
	}
	if now.Before(validUntil.Time) {
		key.Status.PreviousKeyValidUntil = validUntil
		return validUntil.Sub(now), nil
	}
	before := hash.DeepCopy()
	keysecret.DropPrevious(hash)
	if err := r.Client.Patch(ctx, hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return 0, fmt.Errorf("dropping the previous key's hash: %w", err)
	}
	key.Status.PreviousKeyValidUntil = nil
	log.FromContext(ctx).Info("the previous key's grace period ended", "hint", key.Status.KeyHint)
	return 0, nil
}

// ensureHash makes the hash Secret hash plaintext as key generation gen and record its
// issue (hint, rotationHandled, and revealExpiresAt: zero for a delivered key). existing is the hash Secret as the API server holds it (nil:
// none, as far as the caller knows). Moving from an older generation is a rotation: the old
// hash becomes previous.sha256 until the grace period ends. A hash Secret that already hashes
// gen, or a newer one, hashes a key that may be in use: it is never replaced.
func (r *APIKeyReconciler) ensureHash(ctx context.Context, key *switchboardv1alpha1.APIKey, existing *corev1.Secret, gen int64, plaintext, rotationHandled string, revealExpiresAt, now time.Time, grace time.Duration) (*corev1.Secret, error) {
	sum := apikey.Sum(plaintext)
	name := keysecret.HashName(key.UID)
	if existing == nil {
		// A first key almost never finds a hash Secret: try the create and read only if one
		// was left by an interrupted run, one request instead of two.
		secret := keysecret.NewHash(key, r.SystemNamespace, gen, sum)
		keysecret.SetIssued(secret, apikey.Hint(plaintext), rotationHandled, revealExpiresAt)
		err := r.Client.Create(ctx, secret)
		if err == nil {
			return secret, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating hash Secret %s/%s: %w", r.SystemNamespace, name, err)
		}
		existing = &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: name}, existing); err != nil {
			return nil, fmt.Errorf("reading hash Secret %s/%s: %w", r.SystemNamespace, name, err)
		}
	}
	switch current := keysecret.Generation(existing); {
	case current == gen && string(existing.Data[keysecret.DataHash]) == sum.String():
		// An interrupted run of this very issue got this far.
		return existing, nil
	case current >= gen:
		return nil, fmt.Errorf("hash Secret %s/%s already hashes key generation %d; "+
			"switchboard never replaces the hash of a key that may be in use", r.SystemNamespace, name, current)
	}
	before := existing.DeepCopy()
	var keepPreviousUntil time.Time
	if grace > 0 {
		keepPreviousUntil = timePtr(now.Add(grace)).Time
	}
	keysecret.SetCurrent(existing, key, gen, sum, keepPreviousUntil)
	keysecret.SetIssued(existing, apikey.Hint(plaintext), rotationHandled, revealExpiresAt)
	if err := r.Client.Patch(ctx, existing, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("updating hash Secret %s/%s: %w", r.SystemNamespace, name, err)
	}
	return existing, nil
}

// completeRecord writes down, once, what a hash Secret written by an older switchboard does not
// record yet: the hint and the rotation (taken from the status, which was trusted until then),
// and the deadline of a reveal still pending (revealDeadline). From then on the record decides
// and the status only mirrors it.
func (r *APIKeyReconciler) completeRecord(ctx context.Context, key *switchboardv1alpha1.APIKey, hash *corev1.Secret, now time.Time) error {
	if keysecret.Generation(hash) != key.Status.KeyGeneration {
		return nil
	}
	rec, ok := keysecret.IssuedOf(hash)
	if !ok {
		if key.Status.KeyHint == "" {
			return nil
		}
		rec = keysecret.Issued{Generation: key.Status.KeyGeneration, Hint: key.Status.KeyHint, RotationHandled: key.Status.LastHandledRotationAt}
	} else if !rec.RevealExpiresAt.IsZero() || !revealPending(key) {
		return nil
	}
	if revealPending(key) {
		rec.RevealExpiresAt = r.revealDeadline(key, &rec, now)
	}
	before := hash.DeepCopy()
	keysecret.SetIssued(hash, rec.Hint, rec.RotationHandled, rec.RevealExpiresAt)
	if err := r.Client.Patch(ctx, hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the issue of key generation %d in the hash Secret: %w", key.Status.KeyGeneration, err)
	}
	return nil
}

// previousValidUntil reads when the previous key of a hash Secret stops working; nil when
// there is none.
func previousValidUntil(hash *corev1.Secret) *metav1.Time {
	t, ok := keysecret.PreviousValidUntil(hash)
	if !ok {
		return nil
	}
	return timePtr(t)
}

// deleteHash deletes the APIKey's hash Secret, so that the server refuses its key.
func (r *APIKeyReconciler) deleteHash(ctx context.Context, key *switchboardv1alpha1.APIKey) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)}}
	if err := r.Client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting hash Secret %s/%s: %w", r.SystemNamespace, secret.Name, err)
	}
	return nil
}
