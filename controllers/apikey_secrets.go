package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// conflictError says a Secret switchboard needs to write belongs to someone else.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
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
		return "", &conflictError{fmt.Sprintf("secret %s/%s exists and is not managed by switchboard for this APIKey; "+
			"switchboard will not overwrite it: delete it or choose another spec.secretName", key.Namespace, name)}
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
	r.event(key, corev1.EventTypeWarning, ReasonKeySecretReplaced, "ReplaceKeySecret",
		"Secret %s held a key switchboard cannot vouch for as key generation %d (%s); it now holds a new key %s",
		name, gen, why, apikey.Hint(plaintext))
}

// deliveryLost reports whether the key was delivered into spec.secretName and that Secret no
// longer holds it: deleted, or switchboard's Secret of this APIKey holding another generation
// (an issue into it was interrupted). Someone else's Secret under that name is left alone.
func (r *APIKeyReconciler) deliveryLost(ctx context.Context, key *switchboardv1alpha1.APIKey) (bool, error) {
	if key.Spec.SecretName == "" || key.Status.KeyGeneration == 0 {
		return false, nil
	}
	revealed := meta.FindStatusCondition(key.Status.Conditions, switchboardv1alpha1.ConditionRevealed)
	if revealed == nil || revealed.Reason != switchboardv1alpha1.ReasonDelivered {
		return false, nil
	}
	secret, err := r.getSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Spec.SecretName})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, key.Spec.SecretName, err)
	}
	if !keysecret.IsOwnedBy(secret, key, keysecret.ComponentDelivery) || keysecret.Generation(secret) == key.Status.KeyGeneration {
		return false, nil
	}
	// The cache may not have seen the write that published this generation: ask the source.
	live := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(secret), live); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, key.Spec.SecretName, err)
	}
	return keysecret.IsOwnedBy(live, key, keysecret.ComponentDelivery) && keysecret.Generation(live) != key.Status.KeyGeneration, nil
}

// ensureHash makes the hash Secret hash plaintext as key generation gen. Moving from an older
// generation is a rotation: the old hash becomes previous.sha256 until the grace period ends.
func (r *APIKeyReconciler) ensureHash(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64, plaintext string, now time.Time, grace time.Duration) (*corev1.Secret, error) {
	sum := apikey.Sum(plaintext)
	name := keysecret.HashName(key.UID)
	create := func() (*corev1.Secret, error) {
		secret := keysecret.NewHash(key, r.SystemNamespace, gen, sum)
		return secret, r.Client.Create(ctx, secret)
	}
	if gen == 1 {
		// A first key almost never finds a hash Secret: try the create and read only if one
		// was left by an interrupted run, one request instead of two.
		secret, err := create()
		if err == nil {
			return secret, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating hash Secret %s/%s: %w", r.SystemNamespace, name, err)
		}
	}
	existing := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: name}, existing)
	if apierrors.IsNotFound(err) {
		secret, err := create()
		if err != nil {
			return nil, fmt.Errorf("creating hash Secret %s/%s: %w", r.SystemNamespace, name, err)
		}
		return secret, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading hash Secret %s/%s: %w", r.SystemNamespace, name, err)
	}
	current := keysecret.Generation(existing)
	if current > gen {
		return nil, fmt.Errorf("hash Secret %s/%s hashes key generation %d, newer than %d", r.SystemNamespace, name, current, gen)
	}
	if current == gen && string(existing.Data[keysecret.DataHash]) == sum.String() {
		return existing, nil
	}
	before := existing.DeepCopy()
	var keepPreviousUntil time.Time
	if grace > 0 {
		keepPreviousUntil = timePtr(now.Add(grace)).Time
	}
	keysecret.SetCurrent(existing, key, gen, sum, keepPreviousUntil)
	if err := r.Client.Patch(ctx, existing, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("updating hash Secret %s/%s: %w", r.SystemNamespace, name, err)
	}
	return existing, nil
}

func gracePeriod(key *switchboardv1alpha1.APIKey) time.Duration {
	if key.Spec.Rotation == nil {
		return 0
	}
	return key.Spec.Rotation.GracePeriod.Duration
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
