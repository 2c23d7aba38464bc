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
// deadline, deleted (RevealExpired) when the deadline passes unclaimed.
func (r *APIKeyReconciler) reconcileReveal(ctx context.Context, key *switchboardv1alpha1.APIKey, now time.Time, found *keyFindings) (time.Duration, error) {
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
func (r *APIKeyReconciler) sweepRevealSecrets(ctx context.Context, key *switchboardv1alpha1.APIKey, keep int64) error {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(key.Namespace), client.MatchingLabels{
		keysecret.LabelComponent: keysecret.ComponentReveal,
		keysecret.LabelAPIKeyUID: string(key.UID),
	}); err != nil {
		return fmt.Errorf("listing reveal Secrets: %w", err)
	}
	names := map[string]bool{}
	for i := range list.Items {
		if keep < 0 || keysecret.Generation(&list.Items[i]) < keep {
			names[list.Items[i].Name] = true
		}
	}
	if keep < 0 {
		// The cache may not hold a Secret created a moment ago: name the published and the
		// possibly half-issued ones explicitly.
		if key.Status.RevealSecretName != "" {
			names[key.Status.RevealSecretName] = true
		}
		names[keysecret.RevealName(key.Name, key.Status.KeyGeneration+1)] = true
	}
	for name := range names {
		secret := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, secret); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if !keysecret.IsOwnedBy(secret, key, keysecret.ComponentReveal) {
			continue
		}
		uid := secret.UID
		if err := r.Client.Delete(ctx, secret, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting reveal Secret %s/%s: %w", key.Namespace, name, err)
		}
	}
	return nil
}
