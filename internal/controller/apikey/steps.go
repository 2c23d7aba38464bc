package apikey

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/binding"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/grace"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/issuing"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/leak"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/lifecycle"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/objectlife"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// observe, the first step of a reconcile, reads the APIKey req and its Secrets, once, from the
// cache, into a keystate.State: everything the reconcile decides from; confirm replaces parts of
// it with what the API server says, when a decision depends on them.
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
	graceNeeds, bindingNeeds := grace.NeedsConsumers(s, s.Record()), binding.NeedsPods(key)
	if graceNeeds {
		s.Consumers = grace.ReadConsumers(ctx, r.APIReader, key, s.Record().IssuedAt)
		// Watched from now on (a change wakes this key), unless the namespace does not let it.
		s.Consumers.Watched = s.Consumers.Unreadable == "" && r.pods.Want(req)
	}
	if bindingNeeds {
		if s.Bound, err = binding.ReadConsumers(ctx, r.APIReader, key); err != nil {
			return nil, err
		}
		s.Bound.Watched = s.Bound.Unreadable == "" && r.pods.Want(req)
	}
	if !graceNeeds && !bindingNeeds {
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

// policies are the concerns' chains in the order they are asked: the object's own life and
// revocation; a leak, refused and replaced before anything else is done; the key to issue or
// deliver; its life; then upkeep: its record, its old key's grace, its reveal. TestPolicies in
// each concern has a table for each of its policies, TestPlan the chain as a whole.
var policies = slices.Concat(
	objectlife.Policies,
	leak.Policies,
	issuing.Policies,
	lifecycle.Policies,
	issuing.RecordPolicies,
	binding.Policies,
	grace.Policies,
	issuing.RevealPolicies,
)

// observers read each concern's facts, after those they all share (keystate.Observe).
var observers = []keystate.Observer{lifecycle.Observe, grace.Observe, leak.Observe, issuing.Observe, binding.Observe}

// plan, the second step of a reconcile, is a pure function of what was observed: it reads the
// facts the status reports (each concern its own) and asks the concerns' chains of named
// policies, in order, what to do; the first policy that decides ends the chain, and says why.
func plan(s *keystate.State, p keystate.Params) (*keystate.Observation, keystate.Decision) {
	obs := keystate.Observe(s, p, observers...)
	return obs, policies.Evaluate(keystate.Input{S: s, Obs: obs, P: p})
}

// maxChecks bounds the checks one reconcile confirms (hash, reveal, delivery: one each).
const maxChecks = 3

// confirm, the third step of a reconcile, returns the decision to act on. The cache may be
// behind the API server, above all behind the operator's own last writes; before an action
// writes on a decision the cache could get wrong, confirm reads from the API server what d
// rests on (each action says, as a keystate.Confirmer) into s and plans again. A check action
// becomes the decision the confirmed state asks for; any other must come out the same (policy
// and generation), or the reconcile is stale (stale): it writes nothing and runs again once the
// cache has caught up.
func confirm(ctx context.Context, env *keystate.Env, s *keystate.State, p keystate.Params, obs *keystate.Observation, d keystate.Decision) (*keystate.Observation, keystate.Decision, bool, error) {
	for range maxChecks + 1 {
		c, ok := d.Do.(keystate.Confirmer)
		if !ok {
			return obs, d, false, nil
		}
		read, err := c.Confirm(ctx, env, s)
		if errors.Is(err, keystate.ErrStale) {
			return obs, d, true, nil
		}
		if err != nil || !read {
			return obs, d, false, err
		}
		againObs, again := plan(s, p)
		if _, isCheck := d.Do.(keystate.Check); !isCheck {
			if again.Policy != d.Policy || again.Gen != d.Gen {
				return obs, d, true, nil
			}
			return againObs, again, false, nil
		}
		// A check resolved: what the resolved decision rests on is confirmed in turn.
		obs, d = againObs, again
	}
	return obs, d, false, fmt.Errorf("APIKey %s: the checks did not settle in %d reads", s.Name, maxChecks)
}
