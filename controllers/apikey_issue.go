package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The issue of a key: the protocol that writes a new key generation, and the Secrets that hold
// its plaintext (reveal or delivery).

// issue issues key generation gen in the protocol's order: (1) the reveal or delivery Secret
// with the plaintext, (2) the hash Secret from that plaintext, with the record of issuance,
// (3) the status that publishes it. Each step accepts the work of an interrupted earlier run as
// done. The key it replaces, if any, stays valid for grace. cached is the hash Secret as the
// cache has it (nil: none); live says key came from the API server.
func (r *APIKeyReconciler) issue(ctx context.Context, key *switchboardv1alpha1.APIKey, live bool, cached *corev1.Secret, gen int64, now time.Time, grace time.Duration, found *keyFindings) (ctrl.Result, error) {
	hash := cached
	if cached != nil || !live {
		// A cache behind our own last hash write would make us mint a second key for a
		// generation already hashed: the hash Secret at the source decides. (An APIKey just
		// given its finalizer has never had a hash Secret: no read for a first key.)
		var err error
		if hash, err = r.liveHash(ctx, key); err != nil {
			return ctrl.Result{}, err
		}
		if !sameVersion(cached, hash) {
			found.stale = true
			return ctrl.Result{RequeueAfter: staleRetry}, nil
		}
	}
	found.issuing = gen

	plaintext, err := r.ensureKeySecret(ctx, key, gen)
	var conflict *conflictError
	if errors.As(err, &conflict) {
		found.conflict = conflict.Error()
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	rotationHandled := key.Status.LastHandledRotationAt
	if rec := issuedRecord(key, hash); rec != nil {
		rotationHandled = rec.RotationHandled
	}
	if key.Spec.Rotation != nil {
		rotationHandled = key.Spec.Rotation.RequestedAt
	}
	var revealExpiresAt time.Time
	if key.Spec.SecretName == "" {
		revealExpiresAt = timePtr(now.Add(r.RevealTTL)).Time
	}
	hash, err = r.ensureHash(ctx, key, hash, gen, plaintext, rotationHandled, revealExpiresAt, now, grace)
	if err != nil {
		return ctrl.Result{}, err
	}

	key.Status.KeyGeneration = gen
	key.Status.KeyHint = apikey.Hint(plaintext)
	if key.Status.CreatedAt == nil {
		key.Status.CreatedAt = timePtr(now)
	}
	if gen > 1 {
		key.Status.RotatedAt = timePtr(now)
	}
	key.Status.LastHandledRotationAt = rotationHandled
	key.Status.PreviousKeyValidUntil = previousValidUntil(hash)
	if key.Spec.SecretName != "" {
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		found.reveal = switchboardv1alpha1.ReasonDelivered
	} else {
		key.Status.RevealSecretName = keysecret.RevealName(key.Name, gen)
		// An interrupted run of this issue may have recorded its deadline already: it stands.
		key.Status.RevealExpiresAt = timePtr(r.revealDeadline(key, issuedRecord(key, hash), now))
		found.reveal = switchboardv1alpha1.ReasonRevealPending
	}
	found.issued = true
	log.FromContext(ctx).Info("issued key", "hint", key.Status.KeyHint, "keyGeneration", gen)
	// The status patch wakes the next reconcile, which sweeps older reveal Secrets once the
	// new generation is published.
	return ctrl.Result{}, nil
}

// gracePeriod is how long the key a rotation replaces stays valid.
func gracePeriod(key *switchboardv1alpha1.APIKey) time.Duration {
	if key.Spec.Rotation == nil {
		return 0
	}
	return key.Spec.Rotation.GracePeriod.Duration
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
func (r *APIKeyReconciler) ensureKeySecret(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
	if key.Spec.SecretName != "" {
		return r.ensureDeliverySecret(ctx, key, gen)
	}
	return r.ensureRevealSecret(ctx, key, gen)
}

func (r *APIKeyReconciler) ensureRevealSecret(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
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

func (r *APIKeyReconciler) ensureDeliverySecret(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
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
func (r *APIKeyReconciler) adoptable(ctx context.Context, key *switchboardv1alpha1.APIKey, existing *corev1.Secret, gen int64) (plaintext, why string, err error) {
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
func (r *APIKeyReconciler) plaintextOf(s *corev1.Secret) (string, bool) {
	plaintext, err := keysecret.Plaintext(s, r.KeyPrefix)
	return plaintext, err == nil
}

// keySecretReplaced reports that the Secret name held a key switchboard could not prove it
// issued, and now holds a fresh one.
func (r *APIKeyReconciler) keySecretReplaced(key *switchboardv1alpha1.APIKey, name string, gen int64, why, plaintext string) {
	// An action, not a change of condition: it is reported where it happens.
	r.Recorder.Eventf(key, nil, corev1.EventTypeWarning, ReasonKeySecretReplaced, "ReplaceKeySecret",
		"Secret %s held a key switchboard cannot vouch for as key generation %d (%s); it now holds a new key %s",
		name, gen, why, apikey.Hint(plaintext))
}

// deliveryLost reports whether the key was delivered into spec.secretName and that Secret no
// longer holds it: deleted, or switchboard's Secret of this APIKey holding another generation
// (an issue into it was interrupted). Someone else's Secret under that name is left alone and
// reported as a conflict (spec.secretName changed to a Secret that exists): the key is not in
// the Secret the spec names.
func (r *APIKeyReconciler) deliveryLost(ctx context.Context, key *switchboardv1alpha1.APIKey) (lost bool, conflict string, err error) {
	if key.Spec.SecretName == "" || key.Status.KeyGeneration == 0 {
		return false, "", nil
	}
	revealed := meta.FindStatusCondition(key.Status.Conditions, switchboardv1alpha1.ConditionRevealed)
	if revealed == nil || revealed.Reason != switchboardv1alpha1.ReasonDelivered {
		return false, "", nil
	}
	secret, err := r.getSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Spec.SecretName})
	if apierrors.IsNotFound(err) {
		return true, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, key.Spec.SecretName, err)
	}
	if !keysecret.IsOwnedBy(secret, key, keysecret.ComponentDelivery) {
		return false, deliveryConflict(key), nil
	}
	if keysecret.Generation(secret) == key.Status.KeyGeneration {
		return false, "", nil
	}
	// The cache may not have seen the write that published this generation: ask the source.
	live := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(secret), live); err != nil {
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "", fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, key.Spec.SecretName, err)
	}
	if !keysecret.IsOwnedBy(live, key, keysecret.ComponentDelivery) {
		return false, deliveryConflict(key), nil
	}
	return keysecret.Generation(live) != key.Status.KeyGeneration, "", nil
}

// deliveryConflict says that spec.secretName names a Secret this APIKey does not manage.
func deliveryConflict(key *switchboardv1alpha1.APIKey) string {
	return fmt.Sprintf("secret %s/%s exists and is not managed by switchboard for this APIKey; "+
		"switchboard will not overwrite it: delete it or choose another spec.secretName", key.Namespace, key.Spec.SecretName)
}
