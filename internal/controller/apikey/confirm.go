package apikey

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Confirm: the third step of a reconcile. The cache may be behind the API server, above all
// behind the operator's own last writes; before an action writes on a decision the cache could
// get wrong, confirm reads from the API server what that decision rests on (each action says,
// as a confirmer) and plans again. A check action becomes the decision the confirmed state asks
// for; any other must come out the same (policy and generation), or the reconcile is stale: it
// writes nothing and runs again once the cache has caught up.

// errStale says the API server holds another version of the APIKey than the one observed.
var errStale = errors.New("the cache is behind the API server")

// maxChecks bounds the checks one reconcile confirms (hash, reveal, delivery: one each).
const maxChecks = 3

// confirm returns the decision to act on, reading what d rests on into s (and the facts of s as
// read). stale says the cache disagreed with the API server on d.
func (r *Reconciler) confirm(ctx context.Context, s *keyState, obs *observation, d decision) (*observation, decision, bool, error) {
	for range maxChecks + 1 {
		c, ok := d.do.(confirmer)
		if !ok {
			return obs, d, false, nil
		}
		read, err := c.confirm(ctx, r, s)
		if errors.Is(err, errStale) {
			return obs, d, true, nil
		}
		if err != nil || !read {
			return obs, d, false, err
		}
		againObs, again := plan(s, r.params())
		if _, isCheck := d.do.(check); !isCheck {
			if again.policy != d.policy || again.gen != d.gen {
				return obs, d, true, nil
			}
			return againObs, again, false, nil
		}
		// A check resolved: what the resolved decision rests on is confirmed in turn.
		obs, d = againObs, again
	}
	return obs, d, false, fmt.Errorf("APIKey %s: the checks did not settle in %d reads", s.name, maxChecks)
}

// check is an action that only reads what the cache cannot tell (confirm), for the plan to be
// asked again with it; it does nothing itself.
type check interface {
	confirmer
	isCheck()
}

// checkHash reads the hash Secret: none in the cache (or an older one) for an issued key.
type checkHash struct{}

func (checkHash) isCheck() {}

func (checkHash) confirm(ctx context.Context, r *Reconciler, s *keyState) (bool, error) {
	return true, r.liveHash(ctx, s)
}

func (checkHash) do(context.Context, *Reconciler, *keyState, decision) (outcome, error) {
	return outcome{}, nil
}

// checkReveal reads the reveal Secret the status publishes, absent from the cache.
type checkReveal struct{}

func (checkReveal) isCheck() {}

func (checkReveal) confirm(ctx context.Context, r *Reconciler, s *keyState) (read bool, err error) {
	key := s.key
	s.reveal, err = r.liveSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: keysecret.RevealName(key.Name, key.Status.KeyGeneration)})
	s.confirmed.reveal = true
	return true, err
}

func (checkReveal) do(context.Context, *Reconciler, *keyState, decision) (outcome, error) {
	return outcome{}, nil
}

// checkDelivery reads the delivery Secret, which does not hold the delivered key in the cache.
type checkDelivery struct{}

func (checkDelivery) isCheck() {}

func (checkDelivery) confirm(ctx context.Context, r *Reconciler, s *keyState) (read bool, err error) {
	s.delivery, err = r.liveSecret(ctx, client.ObjectKey{Namespace: s.key.Namespace, Name: s.key.Spec.SecretName})
	s.confirmed.delivery = true
	return true, err
}

func (checkDelivery) do(context.Context, *Reconciler, *keyState, decision) (outcome, error) {
	return outcome{}, nil
}

// confirm of an issue: a first issue creates its Secrets, and a create fails on what exists: no
// read. A rotation must know the generation the API server hashes, or a cache behind the last
// rotation would mint a second key for a generation already hashed.
func (issue) confirm(ctx context.Context, r *Reconciler, s *keyState) (bool, error) {
	if s.hash == nil {
		return false, nil
	}
	return true, r.liveHash(ctx, s)
}

// confirm of a publication: the status may be behind our own last patch, or the hash Secret
// our last write.
func (publish) confirm(ctx context.Context, r *Reconciler, s *keyState) (bool, error) {
	if err := r.liveKey(ctx, s); err != nil {
		return false, err
	}
	return true, r.liveHash(ctx, s)
}

// confirm of a revocation for want of use: status.lastUsedAt in the cache may not have caught
// up yet; the APIKey as the API server has it decides, and the record it is written to.
func (revokeUnused) confirm(ctx context.Context, r *Reconciler, s *keyState) (bool, error) {
	if err := r.liveKey(ctx, s); err != nil {
		return false, err
	}
	return true, r.liveHash(ctx, s)
}

// liveKey reads the APIKey from the API server into s (nil when it is gone); a version other
// than the cache's makes the reconcile stale through the plan (it no longer matches).
func (r *Reconciler) liveKey(ctx context.Context, s *keyState) error {
	key := &switchboardv1alpha1.APIKey{}
	switch err := r.APIReader.Get(ctx, s.name, key); {
	case apierrors.IsNotFound(err):
		key = nil
	case err != nil:
		return fmt.Errorf("reading APIKey %s: %w", s.name, err)
	case s.key != nil && key.ResourceVersion != s.key.ResourceVersion:
		// Another version of the APIKey than the one observed: decide from neither.
		return errStale
	}
	s.key, s.confirmed.key = key, true
	return nil
}

// liveHash reads the APIKey's hash Secret from the API server into s; none when the APIKey is
// gone (liveKey found it deleted): the plan then sees no key to act on.
func (r *Reconciler) liveHash(ctx context.Context, s *keyState) (err error) {
	if s.key == nil {
		s.hash, s.confirmed.hash = nil, true
		return nil
	}
	s.hash, err = r.liveSecret(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(s.key.UID)})
	s.confirmed.hash = true
	return err
}

// liveSecret reads a Secret from the API server; nil when there is none.
func (r *Reconciler) liveSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	return secret, nil
}
