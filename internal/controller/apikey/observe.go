package apikey

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/grace"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/leak"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Observe: the first step of a reconcile. Everything an APIKey's reconcile decides from is read
// here, once, from the cache, into a keystate.State; confirm replaces parts of it with what the
// API server says, when a decision depends on them.

// observe reads the APIKey req and its Secrets from the cache.
func (r *Reconciler) observe(ctx context.Context, env *keystate.Env, req types.NamespacedName) (*keystate.State, error) {
	s := &keystate.State{Name: req, Now: r.Clock.Now()}
	key := &switchboardv1alpha1.APIKey{}
	switch err := r.Client.Get(ctx, req, key); {
	case apierrors.IsNotFound(err):
		key = nil
	case err != nil:
		return nil, err
	}
	s.Key = key
	var err error
	if s.Orphans, err = r.orphanHashes(ctx, req, key); err != nil {
		return nil, err
	}
	if key == nil {
		r.pods.Release(req)
		return s, nil
	}
	if s.Hash, err = r.cachedSecret(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(key.UID)}); err != nil {
		return nil, fmt.Errorf("reading the hash Secret: %w", err)
	}
	if err := leak.ObserveReports(ctx, env, s); err != nil {
		return nil, err
	}
	if key.Status.RevealSecretName != "" {
		if s.Reveal, err = r.cachedSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: keysecret.RevealName(key.Name, key.Status.KeyGeneration)}); err != nil {
			return nil, fmt.Errorf("reading the reveal Secret: %w", err)
		}
	}
	if key.Spec.SecretName != "" {
		if s.Delivery, err = r.cachedSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Spec.SecretName}); err != nil {
			return nil, fmt.Errorf("reading the delivery Secret: %w", err)
		}
	}
	if rec := s.Record(); grace.NeedsConsumers(s, rec) {
		s.Consumers = grace.ReadConsumers(ctx, r.APIReader, key, rec.IssuedAt)
		// Watched from now on (a change wakes this key), unless the namespace does not let it.
		s.Consumers.Watched = s.Consumers.Unreadable == "" && r.pods.Want(req)
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
		if secret := &reveals.Items[i]; keystate.IsRevealSecretOf(secret, key) {
			s.Reveals = append(s.Reveals, secret)
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
