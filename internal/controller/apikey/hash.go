package apikey

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The hash Secret: the record of issuance in the system namespace, the only thing the server
// authenticates against.

// ensureHash makes the hash Secret hash plaintext as key generation gen and record its issue
// (rec: hint, rotation handled, reveal deadline or delivery). existing is the hash Secret as
// the reconcile knows it (nil: none). Moving from an older generation is a rotation: the old
// hash becomes previous.sha256 until the grace period ends. A hash Secret that already hashes
// gen, or a newer one, hashes a key that may be in use: it is never replaced.
func (r *Reconciler) ensureHash(ctx context.Context, key *switchboardv1alpha1.APIKey, existing *corev1.Secret, gen int64, plaintext string, rec keysecret.Issued, now time.Time, grace time.Duration) (*corev1.Secret, error) {
	sum := apikey.Sum(plaintext)
	name := keysecret.HashName(key.UID)
	if existing == nil {
		// A first key almost never finds a hash Secret: try the create and read only if one
		// was left by an interrupted run (or the cache was behind), one request instead of two.
		secret := keysecret.NewHash(key, r.SystemNamespace, gen, sum)
		keysecret.SetIssued(secret, rec)
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
	if rec, ok := keysecret.IssuedOf(existing); ok && rec.Revoked() {
		return nil, fmt.Errorf("hash Secret %s/%s records the key revoked at %s; switchboard issues no new key for this APIKey",
			r.SystemNamespace, name, rec.RevokedAt.UTC().Format(time.RFC3339))
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
	keysecret.SetIssued(existing, rec)
	if err := r.Client.Patch(ctx, existing, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("updating hash Secret %s/%s: %w", r.SystemNamespace, name, err)
	}
	return existing, nil
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
func (r *Reconciler) deleteHash(ctx context.Context, key *switchboardv1alpha1.APIKey) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)}}
	if err := r.Client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting hash Secret %s/%s: %w", r.SystemNamespace, secret.Name, err)
	}
	return nil
}
