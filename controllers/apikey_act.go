package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Act: the last step of a reconcile. It carries out the one step planned (and confirmed) and
// sets in the status what that step makes true; the next reconcile observes its effect. Every
// write is made so that a repeat, or a crash between two writes, is harmless: creates fail on
// what exists, deletes carry the UID (and the resourceVersion seen), patches an optimistic lock.

// act carries out next on s.key, the APIKey as the reconcile will store its status.
func (r *APIKeyReconciler) act(ctx context.Context, s *keyState, next *step) error {
	key := s.key
	switch next.kind {
	case stepDeleteOrphans:
		return r.deleteOrphans(ctx, s.orphans)
	case stepCleanUp:
		return r.cleanUp(ctx, s)
	case stepAddFinalizer:
		before := key.DeepCopy()
		controllerutil.AddFinalizer(key, switchboardv1alpha1.FinalizerAPIKey)
		if err := r.Client.Patch(ctx, key, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("adding the finalizer: %w", err)
		}
		return nil
	case stepRevoke:
		return r.revoke(ctx, s, next)
	case stepIssue:
		return r.issue(ctx, s, next)
	case stepPublish:
		return r.publish(ctx, s, next)
	case stepCompleteRecord:
		return r.completeRecord(ctx, s)
	case stepRecordLife:
		return r.recordLife(ctx, s, next)
	case stepRevokeUnused:
		return r.revokeUnused(ctx, s, next)
	case stepApplyTemplate:
		// The cache trims labels and annotations: patch from the Secret as it is.
		live := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.delivery), live); err != nil {
			return fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, s.delivery.Name, err)
		}
		if !keysecret.IsOwnedBy(live, key, keysecret.ComponentDelivery) {
			next.after = staleRetry
			return nil
		}
		before := live.DeepCopy()
		keysecret.SetTemplate(live, key, keysecret.Generation(live))
		if err := r.Client.Patch(ctx, live, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("applying spec.secretTemplate to delivery Secret %s/%s: %w", key.Namespace, s.delivery.Name, err)
		}
		return nil
	case stepDropPrevious:
		before := s.hash.DeepCopy()
		keysecret.DropPrevious(s.hash)
		if err := r.Client.Patch(ctx, s.hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("dropping the previous key's hash: %w", err)
		}
		log.FromContext(ctx).Info("the previous key's grace period ended", "hint", key.Status.KeyHint)
		return nil
	case stepExpireReveal:
		uid, rv := s.reveal.UID, s.reveal.ResourceVersion
		err := r.Client.Delete(ctx, s.reveal, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// A claimer got there first; the next reconcile sees it gone.
			next.after = staleRetry
			return nil
		}
		if err != nil {
			return fmt.Errorf("deleting the expired reveal Secret %s/%s: %w", key.Namespace, s.reveal.Name, err)
		}
		next.found.reveal = switchboardv1alpha1.ReasonRevealExpired
		return nil
	case stepSweep:
		for _, secret := range s.reveals {
			if keysecret.Generation(secret) < key.Status.KeyGeneration {
				if err := r.deleteRevealSecret(ctx, secret); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return nil
}

// revoke removes every reveal Secret of a revoked key, and for spec.revoked its hash, so the
// server refuses the key. A hash Secret that records the operator's own revocation stays: the
// server refuses the key from that record, and without it a new key would be issued.
func (r *APIKeyReconciler) revoke(ctx context.Context, s *keyState, next *step) error {
	key := s.key
	if key.Spec.Revoked {
		if err := r.deleteHash(ctx, key); err != nil {
			return err
		}
	}
	if err := r.deleteRevealSecrets(ctx, s); err != nil {
		return err
	}
	if key.Status.RevealSecretName != "" {
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		next.found.reveal = switchboardv1alpha1.ReasonRevoked
	}
	key.Status.PreviousKeyValidUntil = nil
	return nil
}

// cleanUp removes a deleted APIKey's hash Secret and reveal Secrets, then its finalizer.
func (r *APIKeyReconciler) cleanUp(ctx context.Context, s *keyState) error {
	key := s.key
	if err := r.deleteHash(ctx, key); err != nil {
		return err
	}
	// Owner references would collect them too, but the plaintext should not wait for the
	// garbage collector.
	if err := r.deleteRevealSecrets(ctx, s); err != nil {
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

// deleteRevealSecrets deletes every reveal Secret of the key: those observed, and the two the
// cache may not hold yet (the published generation's and the next one's, which an issue may
// have created a moment ago), read from the API server by name.
func (r *APIKeyReconciler) deleteRevealSecrets(ctx context.Context, s *keyState) error {
	key := s.key
	seen := map[string]bool{}
	for _, secret := range s.reveals {
		seen[secret.Name] = true
		if err := r.deleteRevealSecret(ctx, secret); err != nil {
			return err
		}
	}
	for _, gen := range []int64{key.Status.KeyGeneration, key.Status.KeyGeneration + 1} {
		name := keysecret.RevealName(key.Name, gen)
		if gen < 1 || seen[name] {
			continue
		}
		secret, err := r.liveSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name})
		if err != nil {
			return err
		}
		if secret != nil && isRevealSecretOf(secret, key) {
			if err := r.deleteRevealSecret(ctx, secret); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteRevealSecret deletes secret as it was read: same UID, same resourceVersion, so one
// that changed since is not deleted on an outdated judgement (the next reconcile looks again).
func (r *APIKeyReconciler) deleteRevealSecret(ctx context.Context, secret *corev1.Secret) error {
	uid, rv := secret.UID, secret.ResourceVersion
	err := r.Client.Delete(ctx, secret, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting reveal Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

// deleteOrphans deletes hash Secrets whose APIKey is gone (confirm checked that with the API
// server), each with a UID precondition.
func (r *APIKeyReconciler) deleteOrphans(ctx context.Context, orphans []*corev1.Secret) error {
	for _, hash := range orphans {
		uid := hash.UID
		if err := r.Client.Delete(ctx, hash, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting hash Secret %s/%s of a deleted APIKey: %w", r.SystemNamespace, hash.Name, err)
		}
		log.FromContext(ctx).Info("deleted the hash Secret of an APIKey that is gone", "hashSecret", hash.Name,
			"apiKeyUID", types.UID(hash.Labels[keysecret.LabelAPIKeyUID]))
	}
	return nil
}

// completeRecord writes down, once, what a hash Secret written by an older switchboard does not
// record yet: the hint and the rotation (taken from the status, which was trusted until then),
// the deadline of a reveal still pending (revealDeadline) and where a delivered key went. From
// then on the record decides and the status only mirrors it.
func (r *APIKeyReconciler) completeRecord(ctx context.Context, s *keyState) error {
	key, hash := s.key, s.hash
	rec := *issuedRecord(key, hash)
	if rec.RevealExpiresAt.IsZero() && key.Status.RevealSecretName != "" {
		rec.RevealExpiresAt = revealDeadline(key, &rec, s.now, r.RevealTTL)
	}
	if rec.Delivery == "" && rec.RevealExpiresAt.IsZero() {
		rec.Delivery = legacyRecord(key, rec.Generation).Delivery
	}
	before := hash.DeepCopy()
	keysecret.SetIssued(hash, rec)
	if err := r.Client.Patch(ctx, hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the issue of key generation %d in the hash Secret: %w", key.Status.KeyGeneration, err)
	}
	return nil
}
