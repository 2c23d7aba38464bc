package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The one-time reveal Secret after its key is published: claimed, expired, superseded.

// reconcileReveal follows the one-time reveal Secret: claimed when it disappears before its
// deadline, deleted (RevealExpired) when the deadline passes unclaimed. The deadline is the one
// rec, the hash Secret's record, holds (revealDeadline); the status only shows it.
func (r *APIKeyReconciler) reconcileReveal(ctx context.Context, key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, now time.Time, found *keyFindings) (time.Duration, error) {
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
	deadline := timePtr(r.revealDeadline(key, rec, now))
	key.Status.RevealExpiresAt = deadline
	expired := !now.Before(deadline.Time)
	secret, err := r.getSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name})
	if err == nil && !keysecret.IsOwnedBy(secret, key, keysecret.ComponentReveal) {
		// A Secret of that name that this APIKey does not control is not its reveal Secret,
		// whatever its labels say: it is never deleted, and the reveal Secret is gone.
		err = apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	switch {
	case apierrors.IsNotFound(err) && !expired:
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		found.reveal = switchboardv1alpha1.ReasonRevealClaimed
		return 0, nil
	case apierrors.IsNotFound(err):
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		found.reveal = switchboardv1alpha1.ReasonRevealExpired
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
	key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
	found.reveal = switchboardv1alpha1.ReasonRevealExpired
	return 0, nil
}

// sweepRevealSecrets deletes the APIKey's reveal Secrets of generations below keep (all of
// them when keep < 0): superseded by a rotation, or left behind by a revoke or a delete.
//
// Its cost does not grow with Secrets a tenant makes to look like them: ownership, the name of
// the generation and the type are checked on the cached copy (which keeps exactly what that
// takes), and a Secret is deleted with the UID and resourceVersion seen there, so one that
// changed since is not deleted on an outdated judgement (the next reconcile looks again). Only
// the names the cache may not have yet, the published reveal Secret and the next generation's,
// are read from the API server, and only when everything goes (keep < 0).
func (r *APIKeyReconciler) sweepRevealSecrets(ctx context.Context, key *switchboardv1alpha1.APIKey, keep int64) error {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(key.Namespace), client.MatchingLabels{
		keysecret.LabelComponent: keysecret.ComponentReveal,
		keysecret.LabelAPIKeyUID: string(key.UID),
	}); err != nil {
		return fmt.Errorf("listing reveal Secrets: %w", err)
	}
	seen := map[string]bool{}
	for i := range list.Items {
		secret := &list.Items[i]
		seen[secret.Name] = true
		gen := keysecret.Generation(secret)
		if keep >= 0 && gen >= keep || !isRevealSecretOf(secret, key, gen) {
			continue
		}
		if err := r.deleteRevealSecret(ctx, secret); err != nil {
			return err
		}
	}
	if keep >= 0 {
		return nil
	}
	// The cache may not hold a Secret created a moment ago: look up the published and the
	// possibly half-issued ones by name.
	for _, gen := range []int64{key.Status.KeyGeneration, key.Status.KeyGeneration + 1} {
		name := keysecret.RevealName(key.Name, gen)
		if gen < 1 || seen[name] {
			continue
		}
		secret := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, secret); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if isRevealSecretOf(secret, key, keysecret.Generation(secret)) {
			if err := r.deleteRevealSecret(ctx, secret); err != nil {
				return err
			}
		}
	}
	return nil
}

// isRevealSecretOf says whether secret is a reveal Secret the operator made for key: controlled
// by the APIKey, of the reveal type, and named for its generation label.
func isRevealSecretOf(secret *corev1.Secret, key *switchboardv1alpha1.APIKey, gen int64) bool {
	return gen > 0 && secret.Name == keysecret.RevealName(key.Name, gen) && keysecret.IsOwnedBy(secret, key, keysecret.ComponentReveal)
}

// deleteRevealSecret deletes secret as it was read: same UID, same resourceVersion.
func (r *APIKeyReconciler) deleteRevealSecret(ctx context.Context, secret *corev1.Secret) error {
	uid, rv := secret.UID, secret.ResourceVersion
	err := r.Client.Delete(ctx, secret, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting reveal Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}
