package apikey

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The issue of a key: the protocol that writes a new key generation, the Secrets that hold its
// plaintext (reveal or delivery), and the publication of what the hash Secret records.

// issue issues key generation d.gen: a first key, a rotation, a redelivery into a delivery
// Secret that lost its key (lostHint), or a renewal. The key it replaces, if any, stays valid
// for grace.
type issue struct {
	grace    time.Duration
	lostHint string
	renewal  bool
}

// do issues the key in the protocol's order: (1) the reveal or delivery Secret with the
// plaintext, (2) the hash Secret from that plaintext, with the record of issuance, (3) the
// status that publishes it. Each write accepts the work of an interrupted earlier run as done.
func (i issue) do(ctx context.Context, r *Reconciler, s *keyState, d decision) (outcome, error) {
	key, gen, now := s.key, d.gen, s.now
	out := outcome{issuing: gen, lostHint: i.lostHint}
	plaintext, err := r.ensureKeySecret(ctx, key, gen)
	var conflict *conflictError
	if errors.As(err, &conflict) {
		out.conflict, out.after = conflict.Error(), conflictRetry
		return out, nil
	}
	if err != nil {
		return out, err
	}
	rec := keysecret.Issued{Hint: apikey.Hint(plaintext), RotationHandled: key.Status.LastHandledRotationAt, Renewal: i.renewal}
	if old := s.record(); old != nil {
		rec.RotationHandled = old.RotationHandled
	}
	if key.Spec.Rotation != nil {
		rec.RotationHandled = key.Spec.Rotation.RequestedAt
	}
	if key.Spec.SecretName == "" {
		rec.RevealExpiresAt = timePtr(now.Add(r.RevealTTL)).Time
	} else {
		rec.Delivery = key.Spec.SecretName
	}
	rec.IssuedAt = now.Truncate(time.Second)
	rec.NotAfter, _ = wantNotAfter(key, rec.IssuedAt)
	hash, err := r.ensureHash(ctx, key, s.hash, gen, plaintext, rec, now, i.grace)
	if err != nil {
		return out, err
	}
	s.hash = hash
	out.published, out.lifeChanged = true, true

	key.Status.KeyGeneration = gen
	key.Status.KeyHint = apikey.Hint(plaintext)
	if key.Status.CreatedAt == nil {
		key.Status.CreatedAt = timePtr(now)
	}
	if gen > 1 {
		key.Status.RotatedAt = timePtr(now)
	}
	key.Status.LastHandledRotationAt = rec.RotationHandled
	key.Status.PreviousKeyValidUntil = previousValidUntil(hash)
	if key.Spec.SecretName != "" {
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		out.reveal = switchboardv1alpha1.ReasonDelivered
	} else {
		key.Status.RevealSecretName = keysecret.RevealName(key.Name, gen)
		// An interrupted run of this issue may have recorded its deadline already: it stands.
		key.Status.RevealExpiresAt = timePtr(revealDeadline(key, issuedRecord(key, hash), now, r.RevealTTL))
		out.reveal = switchboardv1alpha1.ReasonRevealPending
	}
	out.issued = true
	log.FromContext(ctx).Info("issued key", "hint", key.Status.KeyHint, "keyGeneration", gen)
	return out, nil
}

// publish puts the status back in line with the hash Secret's record, which confirm read from
// the API server: an issue interrupted before its status patch, or a status someone else
// rewrote. It writes no Secret: the key the hash Secret hashes stays the key.
type publish struct{}

func (publish) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	key, hash, now := s.key, s.hash, s.now
	rec := s.record()
	gen, published := rec.Generation, key.Status.KeyGeneration
	log.FromContext(ctx).Info("the status does not say what the hash Secret records; restoring it",
		"keyGeneration", published, "recordedGeneration", gen, "hint", rec.Hint)
	key.Status.KeyGeneration, key.Status.KeyHint, key.Status.LastHandledRotationAt = gen, rec.Hint, rec.RotationHandled
	key.Status.PreviousKeyValidUntil = previousValidUntil(hash)
	if key.Status.CreatedAt == nil {
		key.Status.CreatedAt = timePtr(now)
	}
	out := outcome{published: true, lifeChanged: true, hashFound: true, restored: true}
	if published == gen {
		return out, nil
	}
	// A generation the status never showed: an issue that stopped after writing the hash, or a
	// status rewritten to another generation. Whether the key Secret of gen still holds the
	// key says which: then this finishes the issue.
	name := key.Spec.SecretName
	component := keysecret.ComponentDelivery
	if name == "" {
		name, component = keysecret.RevealName(key.Name, gen), keysecret.ComponentReveal
	}
	holder, err := r.getSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name})
	if err != nil && !apierrors.IsNotFound(err) {
		return out, fmt.Errorf("reading Secret %s/%s: %w", key.Namespace, name, err)
	}
	holds := err == nil && keysecret.IsOwnedBy(holder, key, component) && keysecret.Generation(holder) == gen
	if holds && published < gen {
		out.restored, out.issued = false, true
		// A renewal interrupted before its status patch is reported as the renewal it was.
		out.renewed = rec.Renewal
		out.renewedUntil, _ = keysecret.PreviousValidUntil(hash)
		if gen > 1 {
			key.Status.RotatedAt = timePtr(now)
		}
	}
	switch {
	case key.Spec.SecretName != "":
		// A Secret that no longer holds gen is redelivered by a later reconcile.
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		out.reveal = switchboardv1alpha1.ReasonDelivered
	case holds:
		// The status's deadline, if any, was another generation's.
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = name, nil
		key.Status.RevealExpiresAt = timePtr(revealDeadline(key, rec, now, r.RevealTTL))
		out.reveal = switchboardv1alpha1.ReasonRevealPending
	default:
		// Someone took the reveal Secret of gen: that is a claim.
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		out.reveal = switchboardv1alpha1.ReasonRevealClaimed
	}
	return out, nil
}

// ensureKeySecret makes sure the plaintext of key generation gen sits in the reveal Secret
// (or the delivery Secret) and returns it.
//
// An existing Secret for gen is adopted only when switchboard can prove it issued the key in
// it: the Secret is controlled by this APIKey and the hash Secret, which tenants cannot write,
// stores that key's SHA-256 for gen (an interrupted reconcile got that far). Anything else may
// have been planted by whoever can write Secrets in the namespace (key fixation), so it is
// replaced by a fresh key, with an Event saying why. After a crash between writing the key
// Secret and the hash there is no stored hash either: that key was never valid, and it is
// replaced too. A Secret under the name that this APIKey does not control is never touched.
func (r *Reconciler) ensureKeySecret(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
	if key.Spec.SecretName != "" {
		return r.ensureDeliverySecret(ctx, key, gen)
	}
	return r.ensureRevealSecret(ctx, key, gen)
}

func (r *Reconciler) ensureRevealSecret(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
	name := keysecret.RevealName(key.Name, gen)
	plaintext, err := apikey.Generate(r.KeyPrefix)
	if err != nil {
		return "", err
	}
	secret := keysecret.NewReveal(key, gen, plaintext)
	err = r.Client.Create(ctx, secret)
	if err == nil {
		return plaintext, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating reveal Secret %s/%s: %w", key.Namespace, name, err)
	}
	existing := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
		return "", fmt.Errorf("reading back reveal Secret %s/%s: %w", key.Namespace, name, err)
	}
	if !keysecret.IsOwnedBy(existing, key, keysecret.ComponentReveal) {
		return "", &conflictError{fmt.Sprintf("secret %s/%s exists and is not the reveal Secret of this APIKey; "+
			"switchboard will not overwrite it: delete or rename it", key.Namespace, name)}
	}
	adopted, why, err := r.adoptable(ctx, key, existing, gen)
	if err != nil || adopted != "" {
		return adopted, err
	}
	// A reveal Secret is immutable: replacing its key means deleting it (this very object,
	// by UID) and creating it anew.
	uid := existing.UID
	if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("deleting reveal Secret %s/%s: %w", key.Namespace, name, err)
	}
	secret = keysecret.NewReveal(key, gen, plaintext)
	if err := r.Client.Create(ctx, secret); err != nil {
		return "", fmt.Errorf("re-creating reveal Secret %s/%s: %w", key.Namespace, name, err)
	}
	r.keySecretReplaced(key, name, gen, why, plaintext)
	return plaintext, nil
}

func (r *Reconciler) ensureDeliverySecret(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
	name := key.Spec.SecretName
	existing := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, existing)
	if apierrors.IsNotFound(err) {
		plaintext, err := apikey.Generate(r.KeyPrefix)
		if err != nil {
			return "", err
		}
		if err := r.Client.Create(ctx, keysecret.NewDelivery(key, gen, plaintext)); err != nil {
			// AlreadyExists included: the next reconcile reads whoever won.
			return "", fmt.Errorf("creating delivery Secret %s/%s: %w", key.Namespace, name, err)
		}
		return plaintext, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, name, err)
	}
	if !keysecret.IsOwnedBy(existing, key, keysecret.ComponentDelivery) {
		return "", &conflictError{deliveryConflict(key)}
	}
	why := ""
	switch g := keysecret.Generation(existing); {
	case g > gen:
		return "", fmt.Errorf("delivery Secret %s/%s holds key generation %d, newer than %d", key.Namespace, name, g, gen)
	case g == gen:
		adopted, reason, err := r.adoptable(ctx, key, existing, gen)
		if err != nil || adopted != "" {
			return adopted, err
		}
		why = reason
	}
	plaintext, err := apikey.Generate(r.KeyPrefix)
	if err != nil {
		return "", err
	}
	// The optimistic lock (resourceVersion) makes the patch fail if the Secret was replaced or
	// changed since it was read: a re-created Secret never has the resourceVersion of this one.
	before := existing.DeepCopy()
	keysecret.SetDelivered(existing, key, gen, plaintext)
	if err := r.Client.Patch(ctx, existing, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return "", fmt.Errorf("updating delivery Secret %s/%s: %w", key.Namespace, name, err)
	}
	if why != "" {
		r.keySecretReplaced(key, name, gen, why, plaintext)
	}
	return plaintext, nil
}

// adoptable decides about an existing Secret of this APIKey that holds key generation gen: it
// returns its key when the hash Secret stores that key's hash for gen, and otherwise why not.
func (r *Reconciler) adoptable(ctx context.Context, key *switchboardv1alpha1.APIKey, existing *corev1.Secret, gen int64) (plaintext, why string, err error) {
	if g := keysecret.Generation(existing); g != gen {
		return "", fmt.Sprintf("it is labelled as key generation %d", g), nil
	}
	candidate, wellFormed := r.plaintextOf(existing)
	if !wellFormed {
		return "", "it holds no well-formed key", nil
	}
	hash := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)}, hash); apierrors.IsNotFound(err) {
		hash = nil
	} else if err != nil {
		return "", "", fmt.Errorf("reading hash Secret %s/%s: %w", r.SystemNamespace, keysecret.HashName(key.UID), err)
	}
	switch err := keysecret.CheckHashed(hash, key.UID, gen, candidate); {
	case err == nil:
		return candidate, "", nil
	case errors.Is(err, keysecret.ErrNoHash):
		return "", fmt.Sprintf("switchboard stored no hash for key generation %d, so it cannot tell its own key from a planted one", gen), nil
	default:
		return "", "its key is not the one switchboard issued: " + err.Error(), nil
	}
}

// plaintextOf returns the key a reveal or delivery Secret holds, and whether it is a
// well-formed key of this operator's prefix.
func (r *Reconciler) plaintextOf(s *corev1.Secret) (string, bool) {
	plaintext, err := keysecret.Plaintext(s, r.KeyPrefix)
	return plaintext, err == nil
}

// keySecretReplaced reports that the Secret name held a key switchboard could not prove it
// issued, and now holds a fresh one.
func (r *Reconciler) keySecretReplaced(key *switchboardv1alpha1.APIKey, name string, gen int64, why, plaintext string) {
	// An action, not a change of condition: it is reported where it happens.
	r.Recorder.Eventf(key, nil, corev1.EventTypeWarning, ReasonKeySecretReplaced, "ReplaceKeySecret",
		"Secret %s held a key switchboard cannot vouch for as key generation %d (%s); it now holds a new key %s",
		name, gen, why, apikey.Hint(plaintext))
}

// deliveryConflict says that spec.secretName names a Secret this APIKey does not manage.
func deliveryConflict(key *switchboardv1alpha1.APIKey) string {
	return fmt.Sprintf("secret %s/%s exists and is not managed by switchboard for this APIKey; "+
		"switchboard will not overwrite it: delete it or choose another spec.secretName", key.Namespace, key.Spec.SecretName)
}
