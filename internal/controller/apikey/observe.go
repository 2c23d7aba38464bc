package apikey

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Observe: the first step of a reconcile. Everything an APIKey's reconcile decides from is read
// here, once, from the cache, into a keyState; confirm replaces parts of it with what the API
// server says, when a decision depends on them.

// keyState is what a reconcile knows of an APIKey and the Secrets around it.
type keyState struct {
	// name is the APIKey reconciled; key is nil when there is no APIKey of that name.
	name types.NamespacedName
	key  *switchboardv1alpha1.APIKey
	// now is the time the reconcile judges expiry, deadlines and grace periods at.
	now time.Time

	// hash is the APIKey's hash Secret, nil when there is none.
	hash *corev1.Secret
	// reveal is the Secret the status publishes as the unclaimed reveal Secret of the current
	// generation (under the one name the operator uses), nil when there is none.
	reveal *corev1.Secret
	// delivery is the Secret spec.secretName names, nil when there is none (or none the cache
	// keeps: it keeps only Secrets labelled as switchboard's).
	delivery *corev1.Secret
	// reveals are the reveal Secrets this APIKey controls, of any generation.
	reveals []*corev1.Secret
	// orphans are hash Secrets labelled for this APIKey's name whose UID is not its own.
	orphans []*corev1.Secret
	// leaks are the LeakReports of the system namespace for the hashes the hash Secret knows
	// of (current, previous, last leaked), by hash.
	leaks map[string]*switchboardv1alpha1.LeakReport
	// consumers are the pods that take the delivery Secret and need a restart to see a new
	// key, read only when the old key's grace may end on evidence (needsConsumers); nil: not read.
	consumers *consumerState

	// What was read from the API server rather than the cache, by confirm: an absence read
	// there is an absence, one read from the cache may be the cache being behind.
	confirmed confirmedReads
}

// confirmedReads says which parts of a keyState come from the API server.
type confirmedReads struct {
	key, hash, reveal, delivery bool
}

// record is the record of issuance of the observed hash Secret (nil: none).
func (s *keyState) record() *keysecret.Issued { return issuedRecord(s.key, s.hash) }

// issuedRecord is the record of issuance of hash Secret hash (nil: none). A hash Secret written
// before switchboard kept the record has only its generation: the rest is taken from the
// status until completeRecord writes it down.
func issuedRecord(key *switchboardv1alpha1.APIKey, hash *corev1.Secret) *keysecret.Issued {
	if hash == nil || keysecret.Generation(hash) == 0 {
		return nil
	}
	if rec, ok := keysecret.IssuedOf(hash); ok {
		return &rec
	}
	return legacyRecord(key, keysecret.Generation(hash))
}

// legacyRecord is what the status said of generation gen before the hash Secret recorded it:
// trusted until completeRecord writes it down, once. The reveal deadline is bounded by
// revealDeadline; a delivery is taken from the Revealed condition.
func legacyRecord(key *switchboardv1alpha1.APIKey, gen int64) *keysecret.Issued {
	rec := &keysecret.Issued{Generation: gen, Hint: key.Status.KeyHint, RotationHandled: key.Status.LastHandledRotationAt}
	if controller.ConditionReason(key.Status.Conditions, switchboardv1alpha1.ConditionRevealed) == switchboardv1alpha1.ReasonDelivered {
		rec.Delivery = key.Spec.SecretName
	}
	return rec
}

// observe reads the APIKey req and its Secrets from the cache.
func (r *Reconciler) observe(ctx context.Context, req types.NamespacedName) (*keyState, error) {
	s := &keyState{name: req, now: r.Clock.Now()}
	key := &switchboardv1alpha1.APIKey{}
	switch err := r.Client.Get(ctx, req, key); {
	case apierrors.IsNotFound(err):
		key = nil
	case err != nil:
		return nil, err
	}
	s.key = key
	var err error
	if s.orphans, err = r.orphanHashes(ctx, req, key); err != nil {
		return nil, err
	}
	if key == nil {
		r.pods.Release(req)
		return s, nil
	}
	if s.hash, err = r.cachedSecret(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)}); err != nil {
		return nil, fmt.Errorf("reading the hash Secret: %w", err)
	}
	if err := r.observeLeaks(ctx, s); err != nil {
		return nil, err
	}
	if key.Status.RevealSecretName != "" {
		if s.reveal, err = r.cachedSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: keysecret.RevealName(key.Name, key.Status.KeyGeneration)}); err != nil {
			return nil, fmt.Errorf("reading the reveal Secret: %w", err)
		}
	}
	if key.Spec.SecretName != "" {
		if s.delivery, err = r.cachedSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Spec.SecretName}); err != nil {
			return nil, fmt.Errorf("reading the delivery Secret: %w", err)
		}
	}
	if rec := s.record(); needsConsumers(s, rec) {
		s.consumers = r.readConsumers(ctx, key, rec.IssuedAt)
		// Watched from now on (a change wakes this key), unless the namespace does not let it.
		s.consumers.watched = s.consumers.unreadable == "" && r.pods.Want(req)
	} else {
		r.pods.Release(req)
	}
	var reveals corev1.SecretList
	if err := r.Client.List(ctx, &reveals, client.InNamespace(key.Namespace), client.MatchingLabels{
		keysecret.LabelComponent: keysecret.ComponentReveal,
		keysecret.LabelAPIKeyUID: string(key.UID),
	}); err != nil {
		return nil, fmt.Errorf("listing reveal Secrets: %w", err)
	}
	for i := range reveals.Items {
		// Ownership is judged on the cached copy, which keeps what that takes (the operator's
		// cache trims tenants' Secrets): decoys a tenant labels cost nothing further.
		if secret := &reveals.Items[i]; isRevealSecretOf(secret, key) {
			s.reveals = append(s.reveals, secret)
		}
	}
	return s, nil
}

// cachedSecret reads a Secret from the cache; nil when the cache has none.
func (r *Reconciler) cachedSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, key, secret); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return secret, nil
}

// isRevealSecretOf says whether secret is a reveal Secret the operator made for key: controlled
// by the APIKey, of the reveal type, and named for its generation label.
func isRevealSecretOf(secret *corev1.Secret, key *switchboardv1alpha1.APIKey) bool {
	gen := keysecret.Generation(secret)
	return gen > 0 && secret.Name == keysecret.RevealName(key.Name, gen) && keysecret.IsOwnedBy(secret, key, keysecret.ComponentReveal)
}

// HashOwnerIndex indexes the operator's cached hash Secrets by the "<namespace>/<name>" of the
// APIKey their labels name.
const HashOwnerIndex = "switchboard.dev/hash-owner"

// hashOwner is the HashOwnerIndex value of a hash Secret of the system namespace.
func hashOwner(systemNamespace string) client.IndexerFunc {
	return func(o client.Object) []string {
		l := o.GetLabels()
		if o.GetNamespace() != systemNamespace || l[keysecret.LabelComponent] != keysecret.ComponentHash ||
			l[keysecret.LabelAPIKeyNamespace] == "" || l[keysecret.LabelAPIKeyName] == "" {
			return nil
		}
		return []string{l[keysecret.LabelAPIKeyNamespace] + "/" + l[keysecret.LabelAPIKeyName]}
	}
}

// orphanHashes lists the hash Secrets labelled for the APIKey name req whose UID is not key's
// (all of them when key is nil). The finalizer makes the operator delete an APIKey's hash
// Secret before the APIKey goes, but whoever may patch an APIKey (a tenant with `edit`) may
// also remove that finalizer and delete it at once: its hash Secret would stay, cached by the
// operator and by every server replica, outside any quota of the tenant's namespace.
func (r *Reconciler) orphanHashes(ctx context.Context, req types.NamespacedName, key *switchboardv1alpha1.APIKey) ([]*corev1.Secret, error) {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.SystemNamespace), client.MatchingFields{HashOwnerIndex: req.Namespace + "/" + req.Name}); err != nil {
		return nil, fmt.Errorf("listing the hash Secrets of APIKey %s: %w", req, err)
	}
	var orphans []*corev1.Secret
	for i := range list.Items {
		if key == nil || types.UID(list.Items[i].Labels[keysecret.LabelAPIKeyUID]) != key.UID {
			orphans = append(orphans, &list.Items[i])
		}
	}
	return orphans, nil
}
