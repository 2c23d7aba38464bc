package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Confirm: the third step of a reconcile. The cache may be behind the API server, above all
// behind the operator's own last writes; before a step writes on a decision the cache could get
// wrong, confirm reads from the API server what that decision rests on and plans again. A check
// step becomes the step the confirmed state asks for; any other step must come out the same, or
// the reconcile is stale: it writes nothing and runs again once the cache has caught up.

// errStale says the API server holds another version of the APIKey than the one observed.
var errStale = errors.New("the cache is behind the API server")

// maxChecks bounds the checks one reconcile confirms (hash, reveal, delivery: one each).
const maxChecks = 3

// confirm returns the step to act on, reading what next depends on into s. stale says the
// cache disagreed with the API server on next's decision.
func (r *APIKeyReconciler) confirm(ctx context.Context, s *keyState, next step) (confirmed step, stale bool, err error) {
	for range maxChecks + 1 {
		read, err := r.confirmReads(ctx, s, next.kind)
		if errors.Is(err, errStale) {
			return next, true, nil
		}
		if err != nil || !read {
			return next, false, err
		}
		again := plan(s, r.params())
		if !next.kind.isCheck() {
			if again.kind != next.kind || again.gen != next.gen {
				return next, true, nil
			}
			return again, false, nil
		}
		// A check resolved: what the resolved step rests on is confirmed in turn.
		next = again
	}
	return next, false, fmt.Errorf("APIKey %s: the checks did not settle in %d reads", s.name, maxChecks)
}

// confirmReads reads from the API server what a step of this kind rests on, into s; read is
// false when it rests on nothing the cache could get wrong.
func (r *APIKeyReconciler) confirmReads(ctx context.Context, s *keyState, kind stepKind) (read bool, err error) {
	switch kind {
	case stepIssue:
		// A first issue creates its Secrets, and a create fails on what exists: no read. A
		// rotation must know the generation the API server hashes, or a cache behind the last
		// rotation would mint a second key for a generation already hashed.
		if s.hash == nil {
			return false, nil
		}
		return true, r.liveHash(ctx, s)
	case stepPublish:
		// The status may be behind our own last patch, or the hash Secret our last write.
		if err := r.liveKey(ctx, s); err != nil {
			return false, err
		}
		return true, r.liveHash(ctx, s)
	case stepRevokeUnused:
		// Revoked for want of use by a status.lastUsedAt the cache may not have caught up with
		// yet: the APIKey as the API server has it decides, and the record it is written to.
		if err := r.liveKey(ctx, s); err != nil {
			return false, err
		}
		return true, r.liveHash(ctx, s)
	case stepDeleteOrphans:
		// An orphan is deleted only when the API server confirms that no APIKey of its UID
		// exists under that name.
		if err := r.liveKey(ctx, s); err != nil {
			return false, err
		}
		var live []*corev1.Secret
		for _, h := range s.orphans {
			if s.key == nil || types.UID(h.Labels[keysecret.LabelAPIKeyUID]) != s.key.UID {
				live = append(live, h)
			}
		}
		s.orphans = live
		return true, nil
	case stepCheckHash:
		return true, r.liveHash(ctx, s)
	case stepCheckReveal:
		key := s.key
		s.reveal, err = r.liveSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: keysecret.RevealName(key.Name, key.Status.KeyGeneration)})
		s.confirmed.reveal = true
		return true, err
	case stepCheckDelivery:
		s.delivery, err = r.liveSecret(ctx, client.ObjectKey{Namespace: s.key.Namespace, Name: s.key.Spec.SecretName})
		s.confirmed.delivery = true
		return true, err
	}
	return false, nil
}

// liveKey reads the APIKey from the API server into s (nil when it is gone); a version other
// than the cache's makes the reconcile stale through the plan (it no longer matches).
func (r *APIKeyReconciler) liveKey(ctx context.Context, s *keyState) error {
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

// liveHash reads the APIKey's hash Secret from the API server into s.
func (r *APIKeyReconciler) liveHash(ctx context.Context, s *keyState) (err error) {
	s.hash, err = r.liveSecret(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: keysecret.HashName(s.key.UID)})
	s.confirmed.hash = true
	return err
}

// liveSecret reads a Secret from the API server; nil when there is none.
func (r *APIKeyReconciler) liveSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	return secret, nil
}
