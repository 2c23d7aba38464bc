package issuing

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
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/binding"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// ReasonDeliverySecretLost is the Event reason of a delivery Secret that was deleted or lost
// its key; a new key is issued into it.
const ReasonDeliverySecretLost = "DeliverySecretLost"

// ReasonKeySecretReplaced is the Event reason of a reveal or delivery Secret whose key
// switchboard could not prove it issued (planted, or left unhashed by a crash): it was
// replaced by a fresh key.
const ReasonKeySecretReplaced = "KeySecretReplaced"

// Issue issues key generation d.Gen: a first key, a rotation, a redelivery into a delivery
// Secret that lost its key (LostHint), or a renewal. The key it replaces, if any, stays valid
// for Grace.
type Issue struct {
	Grace    time.Duration
	LostHint string
	Renewal  bool
}

// Do issues the key in the protocol's order: (1) the reveal or delivery Secret with the
// plaintext, (2) the hash Secret from that plaintext, with the record of issuance, (3) the
// status that publishes it. Each write accepts the work of an interrupted earlier run as done.
func (i Issue) Do(ctx context.Context, env *keystate.Env, s *keystate.State, d keystate.Decision) (keystate.Outcome, error) {
	key, gen, now := s.Key, d.Gen, s.Now
	out := keystate.Outcome{Issuing: gen, LostHint: i.LostHint}
	plaintext, err := ensureKeySecret(ctx, env, key, gen)
	var conflict *conflictError
	if errors.As(err, &conflict) {
		out.Conflict, out.After = conflict.Error(), keystate.ConflictRetry
		return out, nil
	}
	if err != nil {
		return out, err
	}
	rec := keysecret.Issued{Hint: apikey.Hint(plaintext), RotationHandled: key.Status.LastHandledRotationAt, Renewal: i.Renewal}
	if old := s.Record(); old != nil {
		rec.RotationHandled = old.RotationHandled
	}
	if key.Spec.Rotation != nil {
		rec.RotationHandled = key.Spec.Rotation.RequestedAt
	}
	if key.Spec.SecretName == "" {
		rec.RevealExpiresAt = keystate.TimePtr(now.Add(env.RevealTTL)).Time
	} else {
		rec.Delivery = key.Spec.SecretName
	}
	rec.IssuedAt = now.Truncate(time.Second)
	rec.NotAfter, _ = keystate.WantNotAfter(key, rec.IssuedAt)
	bound := binding.Want(s)
	hash, err := ensureHash(ctx, env, key, s.Hash, gen, plaintext, rec, bound, now, i.Grace)
	if err != nil {
		return out, err
	}
	s.Hash = hash
	out.BindingRecorded = binding.Holds(hash, bound)
	out.Published, out.LifeChanged = true, true

	key.Status.KeyGeneration = gen
	key.Status.KeyHint = apikey.Hint(plaintext)
	if key.Status.CreatedAt == nil {
		key.Status.CreatedAt = keystate.TimePtr(now)
	}
	if gen > 1 {
		key.Status.RotatedAt = keystate.TimePtr(now)
	}
	key.Status.LastHandledRotationAt = rec.RotationHandled
	key.Status.PreviousKeyValidUntil = keystate.PreviousValidUntil(hash)
	if key.Spec.SecretName != "" {
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		out.Reveal = switchboardv1alpha1.ReasonDelivered
	} else {
		key.Status.RevealSecretName = keysecret.RevealName(key.Name, gen)
		// An interrupted run of this issue may have recorded its deadline already: it stands.
		key.Status.RevealExpiresAt = keystate.TimePtr(RevealDeadline(key, keystate.IssuedRecord(key, hash), now, env.RevealTTL))
		out.Reveal = switchboardv1alpha1.ReasonRevealPending
	}
	out.Issued = true
	log.FromContext(ctx).Info("issued key", "hint", key.Status.KeyHint, "keyGeneration", gen)
	return out, nil
}

// publish puts the status back in line with the hash Secret's record, which confirm read from
// the API server: an issue interrupted before its status patch, or a status someone else
// rewrote. It writes no Secret: the key the hash Secret hashes stays the key.
type publish struct{}

func (publish) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	key, hash, now := s.Key, s.Hash, s.Now
	rec := s.Record()
	gen, published := rec.Generation, key.Status.KeyGeneration
	log.FromContext(ctx).Info("the status does not say what the hash Secret records; restoring it",
		"keyGeneration", published, "recordedGeneration", gen, "hint", rec.Hint)
	key.Status.KeyGeneration, key.Status.KeyHint, key.Status.LastHandledRotationAt = gen, rec.Hint, rec.RotationHandled
	key.Status.PreviousKeyValidUntil = keystate.PreviousValidUntil(hash)
	if key.Status.CreatedAt == nil {
		key.Status.CreatedAt = keystate.TimePtr(now)
	}
	out := keystate.Outcome{Published: true, LifeChanged: true, HashFound: true, Restored: true}
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
	// From the cache, and when it has none from the API server: a Secret created a moment ago
	// may not be cached yet, and "gone" must be sure.
	holder, at := &corev1.Secret{}, client.ObjectKey{Namespace: key.Namespace, Name: name}
	err := env.Client.Get(ctx, at, holder)
	if apierrors.IsNotFound(err) {
		err = env.APIReader.Get(ctx, at, holder)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return out, fmt.Errorf("reading Secret %s/%s: %w", key.Namespace, name, err)
	}
	holds := err == nil && keysecret.IsOwnedBy(holder, key, component) && keysecret.Generation(holder) == gen
	if holds && published < gen {
		out.Restored, out.Issued = false, true
		// A renewal interrupted before its status patch is reported as the renewal it was.
		out.Renewed = rec.Renewal
		out.RenewedUntil, _ = keysecret.PreviousValidUntil(hash)
		if gen > 1 {
			key.Status.RotatedAt = keystate.TimePtr(now)
		}
	}
	switch {
	case key.Spec.SecretName != "":
		// A Secret that no longer holds gen is redelivered by a later reconcile.
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		out.Reveal = switchboardv1alpha1.ReasonDelivered
	case holds:
		// The status's deadline, if any, was another generation's.
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = name, nil
		key.Status.RevealExpiresAt = keystate.TimePtr(RevealDeadline(key, rec, now, env.RevealTTL))
		out.Reveal = switchboardv1alpha1.ReasonRevealPending
	default:
		// Someone took the reveal Secret of gen: that is a claim.
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		out.Reveal = switchboardv1alpha1.ReasonRevealClaimed
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
func ensureKeySecret(ctx context.Context, env *keystate.Env, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
	if key.Spec.SecretName != "" {
		return ensureDeliverySecret(ctx, env, key, gen)
	}
	return ensureRevealSecret(ctx, env, key, gen)
}

func ensureRevealSecret(ctx context.Context, env *keystate.Env, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
	name := keysecret.RevealName(key.Name, gen)
	plaintext, err := apikey.Generate(env.KeyPrefix)
	if err != nil {
		return "", err
	}
	secret := keysecret.NewReveal(key, gen, plaintext)
	err = env.Client.Create(ctx, secret)
	if err == nil {
		return plaintext, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating reveal Secret %s/%s: %w", key.Namespace, name, err)
	}
	existing := &corev1.Secret{}
	if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
		return "", fmt.Errorf("reading back reveal Secret %s/%s: %w", key.Namespace, name, err)
	}
	if !keysecret.IsOwnedBy(existing, key, keysecret.ComponentReveal) {
		return "", &conflictError{fmt.Sprintf("secret %s/%s exists and is not the reveal Secret of this APIKey; "+
			"switchboard will not overwrite it: delete or rename it", key.Namespace, name)}
	}
	adopted, why, err := adoptable(ctx, env, key, existing, gen)
	if err != nil || adopted != "" {
		return adopted, err
	}
	// A reveal Secret is immutable: replacing its key means deleting it (this very object,
	// by UID) and creating it anew.
	uid := existing.UID
	if err := env.Client.Delete(ctx, existing, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("deleting reveal Secret %s/%s: %w", key.Namespace, name, err)
	}
	secret = keysecret.NewReveal(key, gen, plaintext)
	if err := env.Client.Create(ctx, secret); err != nil {
		return "", fmt.Errorf("re-creating reveal Secret %s/%s: %w", key.Namespace, name, err)
	}
	keySecretReplaced(env, key, name, gen, why, plaintext)
	return plaintext, nil
}

func ensureDeliverySecret(ctx context.Context, env *keystate.Env, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
	name := key.Spec.SecretName
	existing := &corev1.Secret{}
	err := env.APIReader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, existing)
	if apierrors.IsNotFound(err) {
		plaintext, err := apikey.Generate(env.KeyPrefix)
		if err != nil {
			return "", err
		}
		if err := env.Client.Create(ctx, keysecret.NewDelivery(key, gen, plaintext)); err != nil {
			// AlreadyExists included: the next reconcile reads whoever won.
			return "", fmt.Errorf("creating delivery Secret %s/%s: %w", key.Namespace, name, err)
		}
		return plaintext, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, name, err)
	}
	if !keysecret.IsOwnedBy(existing, key, keysecret.ComponentDelivery) {
		return "", &conflictError{keystate.DeliveryConflict(key)}
	}
	why := ""
	switch g := keysecret.Generation(existing); {
	case g > gen:
		return "", fmt.Errorf("delivery Secret %s/%s holds key generation %d, newer than %d", key.Namespace, name, g, gen)
	case g == gen:
		adopted, reason, err := adoptable(ctx, env, key, existing, gen)
		if err != nil || adopted != "" {
			return adopted, err
		}
		why = reason
	}
	plaintext, err := apikey.Generate(env.KeyPrefix)
	if err != nil {
		return "", err
	}
	// The optimistic lock (resourceVersion) makes the patch fail if the Secret was replaced or
	// changed since it was read: a re-created Secret never has the resourceVersion of this one.
	if err := env.Patch(ctx, existing, func() { keysecret.SetDelivered(existing, key, gen, plaintext) }); err != nil {
		return "", fmt.Errorf("updating delivery Secret %s/%s: %w", key.Namespace, name, err)
	}
	if why != "" {
		keySecretReplaced(env, key, name, gen, why, plaintext)
	}
	return plaintext, nil
}

// adoptable decides about an existing Secret of this APIKey that holds key generation gen: it
// returns its key when the hash Secret stores that key's hash for gen, and otherwise why not.
func adoptable(ctx context.Context, env *keystate.Env, key *switchboardv1alpha1.APIKey, existing *corev1.Secret, gen int64) (plaintext, why string, err error) {
	if g := keysecret.Generation(existing); g != gen {
		return "", fmt.Sprintf("it is labelled as key generation %d", g), nil
	}
	candidate, wellFormed := plaintextOf(env, existing)
	if !wellFormed {
		return "", "it holds no well-formed key", nil
	}
	hash := &corev1.Secret{}
	if err := env.APIReader.Get(ctx, client.ObjectKey{Namespace: env.SystemNamespace, Name: keysecret.HashName(key.UID)}, hash); apierrors.IsNotFound(err) {
		hash = nil
	} else if err != nil {
		return "", "", fmt.Errorf("reading hash Secret %s/%s: %w", env.SystemNamespace, keysecret.HashName(key.UID), err)
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

// conflictError says a Secret switchboard needs to write belongs to someone else.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

// plaintextOf returns the key a reveal or delivery Secret holds, and whether it is a
// well-formed key of this operator's prefix.
func plaintextOf(env *keystate.Env, s *corev1.Secret) (string, bool) {
	plaintext, err := keysecret.Plaintext(s, env.KeyPrefix)
	return plaintext, err == nil
}

// keySecretReplaced reports that the Secret name held a key switchboard could not prove it
// issued, and now holds a fresh one.
func keySecretReplaced(env *keystate.Env, key *switchboardv1alpha1.APIKey, name string, gen int64, why, plaintext string) {
	// An action, not a change of condition: it is reported where it happens.
	env.Recorder.Eventf(key, nil, corev1.EventTypeWarning, ReasonKeySecretReplaced, "ReplaceKeySecret",
		"Secret %s held a key switchboard cannot vouch for as key generation %d (%s); it now holds a new key %s",
		name, gen, why, apikey.Hint(plaintext))
}

// ensureHash makes the hash Secret hash plaintext as key generation gen and record its issue
// (rec: hint, rotation handled, reveal deadline or delivery) and the binding record (bound,
// nil: none), in the same write: a bound key is never a bearer key for a moment. existing is the hash Secret as
// the reconcile knows it (nil: none). Moving from an older generation is a rotation: the old
// hash becomes previous.sha256 until the grace period ends. A hash Secret that already hashes
// gen, or a newer one, hashes a key that may be in use: it is never replaced.
func ensureHash(ctx context.Context, env *keystate.Env, key *switchboardv1alpha1.APIKey, existing *corev1.Secret, gen int64, plaintext string, rec keysecret.Issued, bound *keysecret.Binding, now time.Time, grace time.Duration) (*corev1.Secret, error) {
	sum := apikey.Sum(plaintext)
	name := keysecret.HashName(key.UID)
	if existing == nil {
		// A first key almost never finds a hash Secret: try the create and read only if one
		// was left by an interrupted run (or the cache was behind), one request instead of two.
		secret := keysecret.NewHash(key, env.SystemNamespace, gen, sum)
		keysecret.SetIssued(secret, rec)
		binding.Set(secret, bound)
		err := env.Client.Create(ctx, secret)
		if err == nil {
			return secret, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating hash Secret %s/%s: %w", env.SystemNamespace, name, err)
		}
		existing = &corev1.Secret{}
		if err := env.APIReader.Get(ctx, client.ObjectKey{Namespace: env.SystemNamespace, Name: name}, existing); err != nil {
			return nil, fmt.Errorf("reading hash Secret %s/%s: %w", env.SystemNamespace, name, err)
		}
	}
	if rec, ok := keysecret.IssuedOf(existing); ok && rec.Revoked() {
		return nil, fmt.Errorf("hash Secret %s/%s records the key revoked at %s; switchboard issues no new key for this APIKey",
			env.SystemNamespace, name, rec.RevokedAt.UTC().Format(time.RFC3339))
	}
	switch current := keysecret.Generation(existing); {
	case current == gen && string(existing.Data[keysecret.DataHash]) == sum.String():
		// An interrupted run of this very issue got this far.
		return existing, nil
	case current >= gen:
		return nil, fmt.Errorf("hash Secret %s/%s already hashes key generation %d; "+
			"switchboard never replaces the hash of a key that may be in use", env.SystemNamespace, name, current)
	}
	var keepPreviousUntil time.Time
	if grace > 0 {
		keepPreviousUntil = keystate.TimePtr(now.Add(grace)).Time
	}
	if err := env.Patch(ctx, existing, func() {
		keysecret.SetCurrent(existing, key, gen, sum, keepPreviousUntil)
		keysecret.SetIssued(existing, rec)
		binding.Set(existing, bound)
	}); err != nil {
		return nil, fmt.Errorf("updating hash Secret %s/%s: %w", env.SystemNamespace, name, err)
	}
	return existing, nil
}
