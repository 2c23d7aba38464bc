package controllers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// conflictError says a Secret switchboard needs to write belongs to someone else.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

// HashSecretName is the name of an APIKey's hash Secret in the system namespace.
func HashSecretName(key *switchboardv1alpha1.APIKey) string { return "apikey-" + string(key.UID) }

// revealSecretName is the deterministic name of the reveal Secret of key generation gen.
func revealSecretName(key *switchboardv1alpha1.APIKey, gen int64) string {
	return fmt.Sprintf("%s-key-%d", key.Name, gen)
}

func apikeyHint(plaintext string) string { return apikey.Hint(plaintext) }

func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

func generationOf(o client.Object) int64 {
	g, err := strconv.ParseInt(o.GetLabels()[switchboardv1alpha1.LabelKeyGeneration], 10, 64)
	if err != nil {
		return 0
	}
	return g
}

// ensureKeySecret makes sure the plaintext of key generation gen sits in the reveal Secret
// (or the delivery Secret) and returns it. A Secret already written for gen by an interrupted
// reconcile is progress: its key is read back, never replaced.
func (r *APIKeyReconciler) ensureKeySecret(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
	if key.Spec.SecretName != "" {
		return r.ensureDeliverySecret(ctx, key, gen)
	}
	return r.ensureRevealSecret(ctx, key, gen)
}

func (r *APIKeyReconciler) ensureRevealSecret(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64) (string, error) {
	name := revealSecretName(key, gen)
	plaintext, err := apikey.Generate(r.KeyPrefix)
	if err != nil {
		return "", err
	}
	secret, err := r.newKeySecret(key, name, switchboardv1alpha1.ComponentKeyReveal, switchboardv1alpha1.SecretTypeKeyReveal, gen, plaintext)
	if err != nil {
		return "", err
	}
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
	if existing.Type != switchboardv1alpha1.SecretTypeKeyReveal ||
		existing.Labels[switchboardv1alpha1.LabelAPIKeyUID] != string(key.UID) ||
		generationOf(existing) != gen {
		return "", &conflictError{fmt.Sprintf("secret %s/%s exists and is not the reveal Secret of key generation %d; delete or rename it", key.Namespace, name, gen)}
	}
	return readPlaintext(existing)
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
		secret, err := r.newKeySecret(key, name, switchboardv1alpha1.ComponentKeyDelivery, corev1.SecretTypeOpaque, gen, plaintext)
		if err != nil {
			return "", err
		}
		if err := r.Client.Create(ctx, secret); err != nil {
			// AlreadyExists included: the next reconcile reads whoever won.
			return "", fmt.Errorf("creating delivery Secret %s/%s: %w", key.Namespace, name, err)
		}
		return plaintext, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, name, err)
	}
	if existing.Labels[switchboardv1alpha1.LabelManagedBy] != switchboardv1alpha1.ManagedByValue ||
		existing.Labels[switchboardv1alpha1.LabelComponent] != switchboardv1alpha1.ComponentKeyDelivery ||
		existing.Labels[switchboardv1alpha1.LabelAPIKeyUID] != string(key.UID) {
		return "", &conflictError{fmt.Sprintf("secret %s/%s exists and is not managed by switchboard for this APIKey; "+
			"switchboard will not overwrite it: delete it or choose another spec.secretName", key.Namespace, name)}
	}
	if g := generationOf(existing); g == gen {
		return readPlaintext(existing)
	} else if g > gen {
		return "", fmt.Errorf("delivery Secret %s/%s holds key generation %d, newer than %d", key.Namespace, name, g, gen)
	}
	plaintext, err := apikey.Generate(r.KeyPrefix)
	if err != nil {
		return "", err
	}
	before := existing.DeepCopy()
	existing.Labels = keySecretLabels(key, switchboardv1alpha1.ComponentKeyDelivery, gen)
	existing.Data = keySecretData(plaintext)
	if err := r.Client.Patch(ctx, existing, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return "", fmt.Errorf("updating delivery Secret %s/%s: %w", key.Namespace, name, err)
	}
	return plaintext, nil
}

// newKeySecret builds a Secret of key's namespace that holds the plaintext of key generation
// gen, owned by key so that it goes with it.
func (r *APIKeyReconciler) newKeySecret(key *switchboardv1alpha1.APIKey, name, component string, secretType corev1.SecretType, gen int64, plaintext string) (*corev1.Secret, error) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace,
			Name:      name,
			Labels:    keySecretLabels(key, component, gen),
		},
		Type: secretType,
		Data: keySecretData(plaintext),
	}
	if err := controllerutil.SetControllerReference(key, secret, r.Client.Scheme()); err != nil {
		return nil, err
	}
	return secret, nil
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
	if secret.Labels[switchboardv1alpha1.LabelAPIKeyUID] != string(key.UID) || generationOf(secret) == key.Status.KeyGeneration {
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
	return live.Labels[switchboardv1alpha1.LabelAPIKeyUID] == string(key.UID) && generationOf(live) != key.Status.KeyGeneration, nil
}

func readPlaintext(s *corev1.Secret) (string, error) {
	plaintext := string(s.Data[switchboardv1alpha1.KeySecretDataKey])
	if plaintext == "" {
		return "", fmt.Errorf("secret %s/%s holds no key", s.Namespace, s.Name)
	}
	return plaintext, nil
}

func keySecretLabels(key *switchboardv1alpha1.APIKey, component string, gen int64) map[string]string {
	return map[string]string{
		switchboardv1alpha1.LabelManagedBy:     switchboardv1alpha1.ManagedByValue,
		switchboardv1alpha1.LabelComponent:     component,
		switchboardv1alpha1.LabelAPIKeyName:    key.Name,
		switchboardv1alpha1.LabelAPIKeyUID:     string(key.UID),
		switchboardv1alpha1.LabelKeyGeneration: strconv.FormatInt(gen, 10),
	}
}

func keySecretData(plaintext string) map[string][]byte {
	return map[string][]byte{
		switchboardv1alpha1.KeySecretDataKey:     []byte(plaintext),
		switchboardv1alpha1.KeyHintSecretDataKey: []byte(apikey.Hint(plaintext)),
	}
}

func hashSecretLabels(key *switchboardv1alpha1.APIKey, gen int64) map[string]string {
	return map[string]string{
		switchboardv1alpha1.LabelManagedBy:       switchboardv1alpha1.ManagedByValue,
		switchboardv1alpha1.LabelComponent:       switchboardv1alpha1.ComponentKeyHash,
		switchboardv1alpha1.LabelAPIKeyNamespace: key.Namespace,
		switchboardv1alpha1.LabelAPIKeyName:      key.Name,
		switchboardv1alpha1.LabelAPIKeyUID:       string(key.UID),
		switchboardv1alpha1.LabelKeyGeneration:   strconv.FormatInt(gen, 10),
	}
}

// ensureHash makes the hash Secret hash plaintext as key generation gen. Moving from an older
// generation is a rotation: the old hash becomes previous.sha256 until the grace period ends.
func (r *APIKeyReconciler) ensureHash(ctx context.Context, key *switchboardv1alpha1.APIKey, gen int64, plaintext string, now time.Time, grace time.Duration) (*corev1.Secret, error) {
	sum := apikey.Sum(plaintext).String()
	name := HashSecretName(key)
	create := func() (*corev1.Secret, error) {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.SystemNamespace, Name: name, Labels: hashSecretLabels(key, gen)},
			Type:       switchboardv1alpha1.SecretTypeKeyHash,
			Data:       map[string][]byte{switchboardv1alpha1.HashSecretCurrentKey: []byte(sum)},
		}
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
	current := generationOf(existing)
	if current > gen {
		return nil, fmt.Errorf("hash Secret %s/%s hashes key generation %d, newer than %d", r.SystemNamespace, name, current, gen)
	}
	if current == gen && string(existing.Data[switchboardv1alpha1.HashSecretCurrentKey]) == sum {
		return existing, nil
	}
	before := existing.DeepCopy()
	if existing.Data == nil {
		existing.Data = map[string][]byte{}
	}
	if current < gen {
		delete(existing.Data, switchboardv1alpha1.HashSecretPreviousKey)
		delete(existing.Data, switchboardv1alpha1.HashSecretPreviousValidUntilKey)
		if grace > 0 && len(existing.Data[switchboardv1alpha1.HashSecretCurrentKey]) > 0 {
			existing.Data[switchboardv1alpha1.HashSecretPreviousKey] = existing.Data[switchboardv1alpha1.HashSecretCurrentKey]
			existing.Data[switchboardv1alpha1.HashSecretPreviousValidUntilKey] = []byte(timePtr(now.Add(grace)).Format(time.RFC3339))
		}
	}
	existing.Data[switchboardv1alpha1.HashSecretCurrentKey] = []byte(sum)
	existing.Labels = hashSecretLabels(key, gen)
	existing.Type = switchboardv1alpha1.SecretTypeKeyHash
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

// previousValidUntil reads previous.validUntil from a hash Secret; nil when there is none.
func previousValidUntil(hash *corev1.Secret) *metav1.Time {
	raw := string(hash.Data[switchboardv1alpha1.HashSecretPreviousValidUntilKey])
	if raw == "" || len(hash.Data[switchboardv1alpha1.HashSecretPreviousKey]) == 0 {
		return nil
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return nil
	}
	return timePtr(t)
}

// deleteHash deletes the APIKey's hash Secret, so that the server refuses its key.
func (r *APIKeyReconciler) deleteHash(ctx context.Context, key *switchboardv1alpha1.APIKey) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.SystemNamespace, Name: HashSecretName(key)}}
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
		switchboardv1alpha1.LabelComponent: switchboardv1alpha1.ComponentKeyReveal,
		switchboardv1alpha1.LabelAPIKeyUID: string(key.UID),
	}); err != nil {
		return fmt.Errorf("listing reveal Secrets: %w", err)
	}
	names := map[string]bool{}
	for i := range list.Items {
		if keep < 0 || generationOf(&list.Items[i]) < keep {
			names[list.Items[i].Name] = true
		}
	}
	if keep < 0 {
		// The cache may not hold a Secret created a moment ago: name the published and the
		// possibly half-issued ones explicitly.
		if key.Status.RevealSecretName != "" {
			names[key.Status.RevealSecretName] = true
		}
		names[revealSecretName(key, key.Status.KeyGeneration+1)] = true
	}
	for name := range names {
		secret := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, secret); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if secret.Labels[switchboardv1alpha1.LabelAPIKeyUID] != string(key.UID) || secret.Type != switchboardv1alpha1.SecretTypeKeyReveal {
			continue
		}
		uid := secret.UID
		if err := r.Client.Delete(ctx, secret, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting reveal Secret %s/%s: %w", key.Namespace, name, err)
		}
	}
	return nil
}
