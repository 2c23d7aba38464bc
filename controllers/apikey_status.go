package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// cachedSecret reads a Secret from the cache alone.
func (r *APIKeyReconciler) cachedSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, key, secret); err != nil {
		return nil, err
	}
	return secret, nil
}

// getSecret reads a Secret from the cache and, when the cache does not have it, from the API
// server: a Secret created a moment ago may not be cached yet, and "gone" must be sure.
func (r *APIKeyReconciler) getSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, secret)
	}
	if err != nil {
		return nil, err
	}
	return secret, nil
}

// reconcileHash keeps the hash Secret of an issued key: it drops the previous key's hash once
// its grace period ends, and asks to run again at that instant. found is false when the hash
// Secret is gone (deleted by hand): the key is then refused.
func (r *APIKeyReconciler) reconcileHash(ctx context.Context, key *switchboardv1alpha1.APIKey, now time.Time) (time.Duration, bool, error) {
	hash, err := r.getSecret(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)})
	if apierrors.IsNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the hash Secret: %w", err)
	}
	if g := keysecret.Generation(hash); g < key.Status.KeyGeneration {
		// The cache has not caught up with the rotation we just made.
		hash = &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)}, hash); err != nil {
			return 0, !apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
		if keysecret.Generation(hash) < key.Status.KeyGeneration {
			return 0, false, fmt.Errorf("hash Secret %s/%s hashes key generation %d, status says %d",
				r.SystemNamespace, hash.Name, keysecret.Generation(hash), key.Status.KeyGeneration)
		}
	}
	validUntil := previousValidUntil(hash)
	if validUntil == nil {
		key.Status.PreviousKeyValidUntil = nil
		return 0, true, nil
	}
	if now.Before(validUntil.Time) {
		key.Status.PreviousKeyValidUntil = validUntil
		return validUntil.Sub(now), true, nil
	}
	before := hash.DeepCopy()
	keysecret.DropPrevious(hash)
	if err := r.Client.Patch(ctx, hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return 0, false, fmt.Errorf("dropping the previous key's hash: %w", err)
	}
	key.Status.PreviousKeyValidUntil = nil
	log.FromContext(ctx).Info("the previous key's grace period ended", "hint", key.Status.KeyHint)
	return 0, true, nil
}

// reconcileReveal follows the one-time reveal Secret: claimed when it disappears before its
// deadline, deleted (RevealExpired) when the deadline passes unclaimed.
func (r *APIKeyReconciler) reconcileReveal(ctx context.Context, key *switchboardv1alpha1.APIKey, now time.Time) (time.Duration, error) {
	// Followed even when spec.secretName was set after the reveal was published: delivery
	// starts with the next key, and this one stays claimable until its deadline.
	name := key.Status.RevealSecretName
	if name == "" {
		return 0, nil
	}
	if want := keysecret.RevealName(key.Name, key.Status.KeyGeneration); name != want {
		// The operator publishes no other name: someone else wrote this one into the status.
		log.FromContext(ctx).Info("status.revealSecretName names a Secret switchboard did not publish; restoring it", "found", name, "want", want)
		key.Status.RevealSecretName, name = want, want
	}
	deadline := key.Status.RevealExpiresAt
	expired := deadline == nil || !now.Before(deadline.Time)
	secret, err := r.getSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name})
	if err == nil && !keysecret.IsOwnedBy(secret, key, keysecret.ComponentReveal) {
		// A Secret of that name that this APIKey does not control is not its reveal Secret,
		// whatever its labels say: it is never deleted, and the reveal Secret is gone.
		err = apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	switch {
	case apierrors.IsNotFound(err) && !expired:
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		setRevealClaimed(key)
		r.event(key, corev1.EventTypeNormal, "KeyClaimed", "ClaimKey", "key %s was claimed from its reveal Secret", key.Status.KeyHint)
		return 0, nil
	case apierrors.IsNotFound(err):
		r.revealExpired(key)
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading reveal Secret %s/%s: %w", key.Namespace, name, err)
	case !expired:
		return deadline.Sub(now), nil
	}
	uid, rv := secret.UID, secret.ResourceVersion
	err = r.Client.Delete(ctx, secret, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// A claimer got there first; the next reconcile sees it gone.
		return staleRetry, nil
	}
	if err != nil {
		return 0, fmt.Errorf("deleting the expired reveal Secret %s/%s: %w", key.Namespace, name, err)
	}
	r.revealExpired(key)
	return 0, nil
}

func (r *APIKeyReconciler) revealExpired(key *switchboardv1alpha1.APIKey) {
	key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
	setRevealExpired(key)
	r.event(key, corev1.EventTypeWarning, switchboardv1alpha1.ReasonRevealExpired, "ExpireReveal",
		"nobody claimed key %s in time; its reveal Secret was deleted. The key stays valid: rotate it to get one you can see", key.Status.KeyHint)
}

func readyReason(key *switchboardv1alpha1.APIKey) string {
	if c := meta.FindStatusCondition(key.Status.Conditions, switchboardv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func setCondition(key *switchboardv1alpha1.APIKey, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&key.Status.Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: key.Generation,
	})
}

func setReadyIssuing(key *switchboardv1alpha1.APIKey, gen int64) {
	if key.Status.KeyGeneration > 0 {
		// The current key still works while its successor is issued.
		return
	}
	setCondition(key, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonIssuing,
		fmt.Sprintf("issuing key generation %d", gen))
}

func setReadyKeyIssued(key *switchboardv1alpha1.APIKey) {
	setCondition(key, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued,
		fmt.Sprintf("key %s (generation %d) is valid", key.Status.KeyHint, key.Status.KeyGeneration))
}

func setReadyHashMissing(key *switchboardv1alpha1.APIKey, systemNamespace string) {
	setCondition(key, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonIssuing,
		fmt.Sprintf("the hash Secret %s/%s of key %s is missing, so the key is refused; rotate the key to issue a new one",
			systemNamespace, keysecret.HashName(key.UID), key.Status.KeyHint))
}

func setReadyDeliveryConflict(key *switchboardv1alpha1.APIKey, message string) {
	setCondition(key, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict, message)
}

func (r *APIKeyReconciler) setReadyExpired(key *switchboardv1alpha1.APIKey) {
	if readyReason(key) != switchboardv1alpha1.ReasonExpired {
		r.event(key, corev1.EventTypeNormal, "KeyExpired", "ExpireKey", "key %s expired at %s",
			hintOf(key), key.Spec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	setCondition(key, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired,
		fmt.Sprintf("the key expired at %s (spec.expiresAt)", key.Spec.ExpiresAt.UTC().Format(time.RFC3339)))
}

func setReadyRevoked(key *switchboardv1alpha1.APIKey) {
	setCondition(key, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked,
		"the key is revoked (spec.revoked) and refused; create a new APIKey for a new key")
}

func setRevealPending(key *switchboardv1alpha1.APIKey) {
	setCondition(key, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealPending,
		fmt.Sprintf("claim key %s from Secret %s before %s (kubectl switchboard reveal %s)", key.Status.KeyHint,
			key.Status.RevealSecretName, key.Status.RevealExpiresAt.UTC().Format(time.RFC3339), key.Name))
}

func setRevealClaimed(key *switchboardv1alpha1.APIKey) {
	setCondition(key, switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonRevealClaimed,
		fmt.Sprintf("key %s was claimed; it is not stored anywhere else", key.Status.KeyHint))
}

func setRevealExpired(key *switchboardv1alpha1.APIKey) {
	setCondition(key, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealExpired,
		fmt.Sprintf("nobody claimed key %s in time and its reveal Secret was deleted; the key stays valid: rotate it to get one you can see", key.Status.KeyHint))
}

func setRevealedDelivered(key *switchboardv1alpha1.APIKey) {
	setCondition(key, switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonDelivered,
		fmt.Sprintf("key %s is kept in Secret %s", key.Status.KeyHint, key.Spec.SecretName))
}

func setRevealRevoked(key *switchboardv1alpha1.APIKey) {
	setCondition(key, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked,
		fmt.Sprintf("key %s was revoked before anyone claimed it; its reveal Secret was deleted", key.Status.KeyHint))
}
