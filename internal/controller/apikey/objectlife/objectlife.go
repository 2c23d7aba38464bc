// Package objectlife is the APIKey object's own life and its revocation, the first concern its
// controller asks: the hash Secrets of a deleted namesake go, the finalizer comes before any
// hash, a deleted APIKey's Secrets and history go before it, and a revoked key's Secrets go for
// good (the operator's own revocation stays recorded in the hash Secret).
package objectlife

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Policies are the object's own life (orphans of a deleted namesake, deletion, the finalizer)
// and revocation, final: the user's spec, or the operator's own record.
var Policies = keystate.Chain{
	{Name: "OrphanHashes", Decide: orphanHashes},
	{Name: "APIKeyGone", Decide: apiKeyGone},
	{Name: "BeingDeleted", Decide: beingDeleted},
	{Name: "NoFinalizer", Decide: noFinalizer},
	{Name: "Revoked", Decide: revoked},
}

// orphanHashes: hash Secrets labelled for this name whose APIKey is gone are deleted first.
func orphanHashes(in keystate.Input) (keystate.Decision, bool) {
	if len(in.S.Orphans) == 0 {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: deleteOrphans{}, Why: fmt.Sprintf("%d hash Secrets of a deleted APIKey of this name", len(in.S.Orphans))}, true
}

// apiKeyGone: without an APIKey there is nothing else to do.
func apiKeyGone(in keystate.Input) (keystate.Decision, bool) {
	return keystate.Decision{Why: "no APIKey of this name"}, in.S.Key == nil
}

// beingDeleted: a deleted APIKey's Secrets go, then its finalizer.
func beingDeleted(in keystate.Input) (keystate.Decision, bool) {
	key := in.S.Key
	switch {
	case key.DeletionTimestamp.IsZero():
		return keystate.Decision{}, false
	case controllerutil.ContainsFinalizer(key, switchboardv1alpha1.FinalizerAPIKey):
		return keystate.Decision{Do: cleanUp{}, Why: "deleted"}, true
	}
	return keystate.Decision{Why: "deleted, finalizer gone"}, true
}

// noFinalizer: the finalizer comes before any hash exists, so that no hash outlives its APIKey.
func noFinalizer(in keystate.Input) (keystate.Decision, bool) {
	if controllerutil.ContainsFinalizer(in.S.Key, switchboardv1alpha1.FinalizerAPIKey) {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: addFinalizer{}, Why: "no finalizer"}, true
}

// revoked: a revoked key (spec.revoked, which the API server keeps true for good, or the
// operator's own revocation in the hash Secret, which it never removes) has its reveal Secrets
// deleted, and for spec.revoked its hash; settled once nothing of the key is left. A hash Secret
// recording the operator's revocation stays: without it a new key would be issued.
func revoked(in keystate.Input) (keystate.Decision, bool) {
	s, key := in.S, in.S.Key
	if !in.Obs.Revoked {
		return keystate.Decision{}, false
	}
	leftHash := key.Spec.Revoked && s.Hash != nil
	if leftHash || len(s.Reveals) > 0 || key.Status.RevealSecretName != "" || key.Status.PreviousKeyValidUntil != nil {
		return keystate.Decision{Do: revoke{}, Why: "revoked, its Secrets not all gone"}, true
	}
	return keystate.Decision{Why: "revoked"}, true
}

// statusless is what the actions share after which there is no status to write: the APIKey
// is gone, going, or reconciled again at once (keystate.Statusless).
type statusless struct{}

func (statusless) Statusless() {}

// deleteOrphans deletes the hash Secrets labelled for this name whose APIKey is gone.
type deleteOrphans struct{ statusless }

// Confirm: an orphan is deleted only when the API server confirms that no APIKey of its UID
// exists under that name.
func (deleteOrphans) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (bool, error) {
	if err := env.LiveKey(ctx, s); err != nil {
		return false, err
	}
	var live []*corev1.Secret
	for _, h := range s.Orphans {
		if s.Key == nil || types.UID(h.Labels[keysecret.LabelAPIKeyUID]) != s.Key.UID {
			live = append(live, h)
		}
	}
	s.Orphans = live
	return true, nil
}

// Do deletes hash Secrets whose APIKey is gone (Confirm checked that with the API server), each
// with a UID precondition, and their keys' histories.
func (deleteOrphans) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	for _, hash := range s.Orphans {
		// The history first: the hash Secret is what finds it again if this fails.
		key := types.UID(hash.Labels[keysecret.LabelAPIKeyUID])
		if key != "" {
			if err := env.Journal.Delete(ctx, key); err != nil {
				return keystate.Outcome{}, err
			}
		}
		uid := hash.UID
		if err := env.Client.Delete(ctx, hash, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return keystate.Outcome{}, fmt.Errorf("deleting hash Secret %s/%s of a deleted APIKey: %w", env.SystemNamespace, hash.Name, err)
		}
		log.FromContext(ctx).Info("deleted the hash Secret and history of an APIKey that is gone", "hashSecret", hash.Name, "apiKeyUID", key)
	}
	return keystate.Outcome{}, nil
}

// cleanUp deletes a deleted APIKey's hash and reveal Secrets and its history, then its finalizer.
type cleanUp struct{ statusless }

func (cleanUp) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	key := s.Key
	// Its history goes with its hash, first (the hash Secret is what finds an orphan's again);
	// the tenant's copy, which the APIKey owns, goes with the APIKey.
	if err := env.Journal.Delete(ctx, key.UID); err != nil {
		return keystate.Outcome{}, err
	}
	if err := deleteHash(ctx, env, key); err != nil {
		return keystate.Outcome{}, err
	}
	// Owner references would collect them too, but the plaintext should not wait for the
	// garbage collector.
	if err := deleteRevealSecrets(ctx, env, s); err != nil {
		return keystate.Outcome{}, err
	}
	if err := env.Patch(ctx, key, func() { controllerutil.RemoveFinalizer(key, switchboardv1alpha1.FinalizerAPIKey) }); err != nil {
		return keystate.Outcome{}, client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("deleted the key's hash", "hint", key.Status.KeyHint)
	return keystate.Outcome{}, nil
}

// addFinalizer adds the finalizer, before any hash exists, so that no hash outlives its APIKey.
type addFinalizer struct{ statusless }

func (addFinalizer) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	if err := env.Patch(ctx, s.Key, func() { controllerutil.AddFinalizer(s.Key, switchboardv1alpha1.FinalizerAPIKey) }); err != nil {
		return keystate.Outcome{}, fmt.Errorf("adding the finalizer: %w", err)
	}
	return keystate.Outcome{}, nil
}

// revoke removes every reveal Secret of a revoked key, and for spec.revoked its hash, so the
// server refuses the key. A hash Secret that records the operator's own revocation stays: the
// server refuses the key from that record, and without it a new key would be issued.
type revoke struct{}

func (revoke) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	key := s.Key
	if key.Spec.Revoked {
		if err := deleteHash(ctx, env, key); err != nil {
			return keystate.Outcome{}, err
		}
	}
	if err := deleteRevealSecrets(ctx, env, s); err != nil {
		return keystate.Outcome{}, err
	}
	var out keystate.Outcome
	if key.Status.RevealSecretName != "" {
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		out.Reveal = switchboardv1alpha1.ReasonRevoked
	}
	key.Status.PreviousKeyValidUntil = nil
	return out, nil
}

// deleteRevealSecrets deletes every reveal Secret of the key: those observed, and the two the
// cache may not hold yet (the published generation's and the next one's, which an issue may
// have created a moment ago), read from the API server by name.
func deleteRevealSecrets(ctx context.Context, env *keystate.Env, s *keystate.State) error {
	key := s.Key
	seen := map[string]bool{}
	for _, secret := range s.Reveals {
		seen[secret.Name] = true
		if err := env.DeleteRevealSecret(ctx, secret); err != nil {
			return err
		}
	}
	for _, gen := range []int64{key.Status.KeyGeneration, key.Status.KeyGeneration + 1} {
		name := keysecret.RevealName(key.Name, gen)
		if gen < 1 || seen[name] {
			continue
		}
		secret, err := env.LiveSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name})
		if err != nil {
			return err
		}
		if secret != nil && keystate.IsRevealSecretOf(secret, key) {
			if err := env.DeleteRevealSecret(ctx, secret); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteHash deletes the APIKey's hash Secret, so that the server refuses its key.
func deleteHash(ctx context.Context, env *keystate.Env, key *switchboardv1alpha1.APIKey) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: env.SystemNamespace, Name: keysecret.HashName(key.UID)}}
	if err := env.Client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting hash Secret %s/%s: %w", env.SystemNamespace, secret.Name, err)
	}
	return nil
}
