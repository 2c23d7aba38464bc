package apikey

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Act: the last step of a reconcile. It carries out the one action decided (and confirmed) and
// says what it did (an outcome); the status is then set from the observation and that outcome.
// Every write is made so that a repeat, or a crash between two writes, is harmless: creates fail
// on what exists, deletes carry the UID (and the resourceVersion seen), patches an optimistic lock.

// action is what a policy asks a reconcile to do.
type action interface {
	// do carries the action out on s (s.key is the APIKey as the reconcile will store its
	// status) and says what it did.
	do(ctx context.Context, r *Reconciler, s *keyState, d decision) (outcome, error)
}

// confirmer is an action whose decision rests on what the cache could get wrong: confirm reads
// it from the API server into s (read is false when there was nothing to read) and the plan is
// asked again.
type confirmer interface {
	confirm(ctx context.Context, r *Reconciler, s *keyState) (read bool, err error)
}

// statusless is an action after which there is no status to write: the APIKey is gone, going,
// or reconciled again at once (its finalizer's or its orphans' watch events wake it).
type statusless interface{ statusless() }

// outcome is what act did, for the status: with the observation, all the conditions are set from.
type outcome struct {
	// issuing is the key generation an issue started for (0: none); issued says it published
	// it, published that the status's key fields were written from the record (an issue or a
	// publication), lostHint the key a lost delivery Secret held.
	issuing   int64
	issued    bool
	published bool
	lostHint  string
	// renewed: the generation published was issued by a renewal (set by publish, which
	// finishes an issue interrupted before its status patch; an issue's decision says it),
	// renewedUntil when the key it replaced stops being accepted (zero: it already is not).
	renewed      bool
	renewedUntil time.Time
	// conflict says why the issue cannot go on: a Secret it must write is not the APIKey's.
	conflict string
	// restored: the status did not say what the hash Secret records, and was put back.
	restored bool
	// hashFound: the hash Secret was read and is the status's.
	hashFound bool
	// reveal is what became of the one-time reveal, as a Revealed reason ("" when unchanged).
	reveal string
	// revokedAt: the action revoked the key for want of use, at that time.
	revokedAt time.Time
	// lifeChanged: the record of the key's life was written; its conditions are read again.
	lifeChanged bool
	// leakRefused: the action recorded a leaked key in the hash Secret, which refuses it;
	// leakRolled: it rolled (or found it may not roll) the workloads reading its delivery Secret.
	leakRefused bool
	leakRolled  bool
	// after is how soon to look again (0: when the observation says).
	after time.Duration
}

// deleteOrphans deletes the hash Secrets labelled for this name whose APIKey is gone.
type deleteOrphans struct{}

func (deleteOrphans) statusless() {}

// confirm: an orphan is deleted only when the API server confirms that no APIKey of its UID
// exists under that name.
func (deleteOrphans) confirm(ctx context.Context, r *Reconciler, s *keyState) (bool, error) {
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
}

func (deleteOrphans) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	return outcome{}, r.deleteOrphans(ctx, s.orphans)
}

// cleanUp deletes a deleted APIKey's hash and reveal Secrets and its history, then its finalizer.
type cleanUp struct{}

func (cleanUp) statusless() {}

func (cleanUp) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	return outcome{}, r.cleanUp(ctx, s)
}

// addFinalizer adds the finalizer, before any hash exists, so that no hash outlives its APIKey.
type addFinalizer struct{}

func (addFinalizer) statusless() {}

func (addFinalizer) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	key := s.key
	before := key.DeepCopy()
	controllerutil.AddFinalizer(key, switchboardv1alpha1.FinalizerAPIKey)
	if err := r.Client.Patch(ctx, key, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return outcome{}, fmt.Errorf("adding the finalizer: %w", err)
	}
	return outcome{}, nil
}

// applyTemplate gives the delivery Secret spec.secretTemplate's labels and annotations.
type applyTemplate struct{}

func (applyTemplate) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	key := s.key
	// The cache trims labels and annotations: patch from the Secret as it is.
	live := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.delivery), live); err != nil {
		return outcome{}, fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, s.delivery.Name, err)
	}
	if !keysecret.IsOwnedBy(live, key, keysecret.ComponentDelivery) {
		return outcome{after: staleRetry}, nil
	}
	before := live.DeepCopy()
	keysecret.SetTemplate(live, key, keysecret.Generation(live))
	if err := r.Client.Patch(ctx, live, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return outcome{}, fmt.Errorf("applying spec.secretTemplate to delivery Secret %s/%s: %w", key.Namespace, s.delivery.Name, err)
	}
	return outcome{}, nil
}

// dropPrevious drops the previous key's hash: its grace period ended, or its consumers moved.
type dropPrevious struct {
	// early is the evidence that ended the grace before its fixed end ("" when it ran out).
	early string
}

// confirm: an early end rests on the old key's record of use (status.previousKeyUse), which the
// cache may not have yet — the server's last write of it may be the newest thing there is —
// and on the hash Secret: both are read from the API server, and a cached APIKey behind the
// live one makes the reconcile stale. A grace that ran out rests on the hash Secret's instant
// alone.
func (p dropPrevious) confirm(ctx context.Context, r *Reconciler, s *keyState) (bool, error) {
	if p.early == "" {
		return false, nil
	}
	if err := r.liveKey(ctx, s); err != nil {
		return false, err
	}
	return true, r.liveHash(ctx, s)
}

func (p dropPrevious) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	before := s.hash.DeepCopy()
	if p.early != "" {
		// Why it ended goes into the same write: the GraceEvidence condition says it from the
		// record, even when the status patch that follows is lost.
		keysecret.EndPreviousEarly(s.hash, p.early)
	} else {
		keysecret.DropPrevious(s.hash)
	}
	if err := r.Client.Patch(ctx, s.hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return outcome{}, fmt.Errorf("dropping the previous key's hash: %w", err)
	}
	if p.early != "" {
		log.FromContext(ctx).Info("the previous key's grace ended early: its consumers moved", "hint", s.key.Status.KeyHint)
		r.Recorder.Eventf(s.key, nil, corev1.EventTypeNormal, ReasonGraceEndedEarly, "EndGrace", "%s", p.early)
		return outcome{}, nil
	}
	log.FromContext(ctx).Info("the previous key's grace period ended", "hint", s.key.Status.KeyHint)
	return outcome{}, nil
}

// ReasonGraceEndedEarly is the Event reason of an old key whose grace ended before its fixed
// end because its consumers moved to the new key (spec.graceEndsWhenUnusedFor).
const ReasonGraceEndedEarly = "GraceEndedEarly"

// expireReveal deletes the unclaimed reveal Secret whose deadline passed.
type expireReveal struct{}

func (expireReveal) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	uid, rv := s.reveal.UID, s.reveal.ResourceVersion
	err := r.Client.Delete(ctx, s.reveal, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// A claimer got there first; the next reconcile sees it gone.
		return outcome{after: staleRetry}, nil
	}
	if err != nil {
		return outcome{}, fmt.Errorf("deleting the expired reveal Secret %s/%s: %w", s.key.Namespace, s.reveal.Name, err)
	}
	return outcome{reveal: switchboardv1alpha1.ReasonRevealExpired}, nil
}

// sweep deletes the reveal Secrets of generations the status no longer publishes.
type sweep struct{}

func (sweep) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	for _, secret := range s.reveals {
		if keysecret.Generation(secret) < s.key.Status.KeyGeneration {
			if err := r.deleteRevealSecret(ctx, secret); err != nil {
				return outcome{}, err
			}
		}
	}
	return outcome{}, nil
}

// completeRecord writes down what a hash Secret of an older switchboard does not record.
type completeRecord struct{}

func (completeRecord) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	return outcome{}, r.completeRecord(ctx, s)
}

// revoke deletes every reveal Secret of a revoked key, and its hash unless the operator's own
// revocation is recorded there.
type revoke struct{}

func (revoke) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	return r.revoke(ctx, s)
}

// revoke removes every reveal Secret of a revoked key, and for spec.revoked its hash, so the
// server refuses the key. A hash Secret that records the operator's own revocation stays: the
// server refuses the key from that record, and without it a new key would be issued.
func (r *Reconciler) revoke(ctx context.Context, s *keyState) (outcome, error) {
	key := s.key
	if key.Spec.Revoked {
		if err := r.deleteHash(ctx, key); err != nil {
			return outcome{}, err
		}
	}
	if err := r.deleteRevealSecrets(ctx, s); err != nil {
		return outcome{}, err
	}
	var out outcome
	if key.Status.RevealSecretName != "" {
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		out.reveal = switchboardv1alpha1.ReasonRevoked
	}
	key.Status.PreviousKeyValidUntil = nil
	return out, nil
}

// cleanUp removes a deleted APIKey's hash Secret, history and reveal Secrets, then its finalizer.
func (r *Reconciler) cleanUp(ctx context.Context, s *keyState) error {
	key := s.key
	// Its history goes with its hash, first (the hash Secret is what finds an orphan's again);
	// the tenant's copy, which the APIKey owns, goes with the APIKey.
	if err := r.journal().Delete(ctx, key.UID); err != nil {
		return err
	}
	if err := r.deleteHash(ctx, key); err != nil {
		return err
	}
	// Owner references would collect them too, but the plaintext should not wait for the
	// garbage collector.
	if err := r.deleteRevealSecrets(ctx, s); err != nil {
		return err
	}
	before := key.DeepCopy()
	controllerutil.RemoveFinalizer(key, switchboardv1alpha1.FinalizerAPIKey)
	if err := r.Client.Patch(ctx, key, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("deleted the key's hash", "hint", key.Status.KeyHint)
	return nil
}

// deleteRevealSecrets deletes every reveal Secret of the key: those observed, and the two the
// cache may not hold yet (the published generation's and the next one's, which an issue may
// have created a moment ago), read from the API server by name.
func (r *Reconciler) deleteRevealSecrets(ctx context.Context, s *keyState) error {
	key := s.key
	seen := map[string]bool{}
	for _, secret := range s.reveals {
		seen[secret.Name] = true
		if err := r.deleteRevealSecret(ctx, secret); err != nil {
			return err
		}
	}
	for _, gen := range []int64{key.Status.KeyGeneration, key.Status.KeyGeneration + 1} {
		name := keysecret.RevealName(key.Name, gen)
		if gen < 1 || seen[name] {
			continue
		}
		secret, err := r.liveSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name})
		if err != nil {
			return err
		}
		if secret != nil && isRevealSecretOf(secret, key) {
			if err := r.deleteRevealSecret(ctx, secret); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteRevealSecret deletes secret as it was read: same UID, same resourceVersion, so one
// that changed since is not deleted on an outdated judgement (the next reconcile looks again).
func (r *Reconciler) deleteRevealSecret(ctx context.Context, secret *corev1.Secret) error {
	uid, rv := secret.UID, secret.ResourceVersion
	err := r.Client.Delete(ctx, secret, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting reveal Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

// deleteOrphans deletes hash Secrets whose APIKey is gone (confirm checked that with the API
// server), each with a UID precondition, and their keys' histories.
func (r *Reconciler) deleteOrphans(ctx context.Context, orphans []*corev1.Secret) error {
	for _, hash := range orphans {
		// The history first: the hash Secret is what finds it again if this fails.
		key := types.UID(hash.Labels[keysecret.LabelAPIKeyUID])
		if key != "" {
			if err := r.journal().Delete(ctx, key); err != nil {
				return err
			}
		}
		uid := hash.UID
		if err := r.Client.Delete(ctx, hash, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting hash Secret %s/%s of a deleted APIKey: %w", r.SystemNamespace, hash.Name, err)
		}
		log.FromContext(ctx).Info("deleted the hash Secret and history of an APIKey that is gone", "hashSecret", hash.Name, "apiKeyUID", key)
	}
	return nil
}

// completeRecord writes down, once, what a hash Secret written by an older switchboard does not
// record yet: the hint and the rotation (taken from the status, which was trusted until then),
// the deadline of a reveal still pending (revealDeadline) and where a delivered key went. From
// then on the record decides and the status only mirrors it.
func (r *Reconciler) completeRecord(ctx context.Context, s *keyState) error {
	key, hash := s.key, s.hash
	rec := *issuedRecord(key, hash)
	if rec.RevealExpiresAt.IsZero() && key.Status.RevealSecretName != "" {
		rec.RevealExpiresAt = revealDeadline(key, &rec, s.now, r.RevealTTL)
	}
	if rec.Delivery == "" && rec.RevealExpiresAt.IsZero() {
		rec.Delivery = legacyRecord(key, rec.Generation).Delivery
	}
	before := hash.DeepCopy()
	keysecret.SetIssued(hash, rec)
	if err := r.Client.Patch(ctx, hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the issue of key generation %d in the hash Secret: %w", key.Status.KeyGeneration, err)
	}
	return nil
}
