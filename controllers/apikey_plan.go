package controllers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
)

// Plan: the second step of a reconcile. plan is a pure function from what was observed
// (keyState) to the one thing to do next; every decision of the APIKey reconciler is in it, and
// TestPlan covers each. The decisions rest on what switchboard wrote where tenants and the
// server cannot write (the hash Secret's record of issuance, owner references with UIDs) and on
// the tenant's spec; a status field is never a reason to write anything.

// stepKind is what a step does.
type stepKind int

const (
	// stepNone writes nothing but the status.
	stepNone stepKind = iota
	// stepDeleteOrphans deletes the hash Secrets labelled for this name whose APIKey is gone.
	stepDeleteOrphans
	// stepCleanUp deletes a deleted APIKey's hash and reveal Secrets, then its finalizer.
	stepCleanUp
	// stepAddFinalizer comes before any hash exists, so that no hash outlives its APIKey.
	stepAddFinalizer
	// stepRevoke deletes every reveal Secret of a revoked key, and its hash unless the
	// operator's own revocation is recorded there.
	stepRevoke
	// stepIssue issues key generation gen: a first key, a rotation, or a redelivery.
	stepIssue
	// stepPublish puts the status back to what the hash Secret records.
	stepPublish
	// stepCompleteRecord writes down what a hash Secret of an older switchboard does not record.
	stepCompleteRecord
	// stepDropPrevious drops the previous key's hash: its grace period ended.
	stepDropPrevious
	// stepExpireReveal deletes the unclaimed reveal Secret whose deadline passed.
	stepExpireReveal
	// stepSweep deletes the reveal Secrets of generations the status no longer publishes.
	stepSweep
	// stepRecordLife records the current key's issue time and lifetime end in its hash Secret.
	stepRecordLife
	// stepRevokeUnused revokes a key unused for spec.revokeWhenUnusedFor, in its hash Secret.
	stepRevokeUnused
	// stepApplyTemplate gives the delivery Secret spec.secretTemplate's labels and annotations.
	stepApplyTemplate
	// The checks: a decision needs what the cache does not show (it may be behind); confirm
	// reads it from the API server and plans again.
	stepCheckHash     // no hash Secret (or an older one) for an issued key
	stepCheckReveal   // no reveal Secret where the status publishes one
	stepCheckDelivery // the delivery Secret does not hold the delivered key
)

var stepNames = [...]string{"none", "delete orphan hashes", "clean up", "add finalizer", "revoke", "issue", "publish",
	"complete record", "drop previous", "expire reveal", "sweep", "record life", "revoke unused", "apply template", "check hash", "check reveal", "check delivery"}

func (k stepKind) String() string { return stepNames[k] }

// isCheck says the step only asks confirm to read something.
func (k stepKind) isCheck() bool { return k >= stepCheckHash }

// step is the plan's answer: what to do, and what the status says of it.
type step struct {
	kind stepKind
	// gen and grace: the generation stepIssue issues, and how long the key it replaces stays
	// valid; lostHint is the key a lost delivery Secret held (a redelivery).
	gen      int64
	grace    time.Duration
	lostHint string
	// found is what the status says, as far as the plan can tell (act adds what it learns).
	found keyFindings
	// problem is a state the operator cannot repair; the reconcile fails with it.
	problem string
	// after is when time alone changes the plan (0: never).
	after time.Duration
}

// planParams are the operator's settings that decisions depend on.
type planParams struct {
	revealTTL time.Duration
	// expiryWarning and unusedAfter: ExpiringSoon and Unused (apikey_lifecycle.go).
	expiryWarning, unusedAfter time.Duration
	// minRenewal is the least interval between two renewals of a key (earliestRenewal).
	minRenewal renewalinterval.Minimum
}

// plan decides the next step for s.
func plan(s *keyState, p planParams) step {
	if len(s.orphans) > 0 {
		return step{kind: stepDeleteOrphans}
	}
	key := s.key
	switch {
	case key == nil:
		return step{}
	case !key.DeletionTimestamp.IsZero():
		if controllerutil.ContainsFinalizer(key, switchboardv1alpha1.FinalizerAPIKey) {
			return step{kind: stepCleanUp}
		}
		return step{}
	case !controllerutil.ContainsFinalizer(key, switchboardv1alpha1.FinalizerAPIKey):
		return step{kind: stepAddFinalizer}
	case key.Spec.Revoked:
		// The API server keeps spec.revoked true for good: the spec alone decides. Revoked and
		// settled once nothing of the key is left.
		found := keyFindings{revoked: true}
		if s.hash != nil || len(s.reveals) > 0 || key.Status.RevealSecretName != "" || key.Status.PreviousKeyValidUntil != nil {
			return step{kind: stepRevoke, found: found}
		}
		return step{found: found}
	}
	rec := s.record()
	if rec != nil && rec.Revoked() {
		// The operator revoked the key itself (revokeWhenUnusedFor): its record says so for
		// good, the server refuses the key, and nothing is issued under that record again, a
		// rotation included. The hash Secret stays: without it a new key would be issued.
		found := keyFindings{revoked: true, revokedAt: rec.RevokedAt}
		if len(s.reveals) > 0 || key.Status.RevealSecretName != "" || key.Status.PreviousKeyValidUntil != nil {
			return step{kind: stepRevoke, found: found}
		}
		return step{found: found}
	}
	found := keyFindings{expired: key.Spec.ExpiresAt != nil && !s.now.Before(key.Spec.ExpiresAt.Time)}
	switch action, gen := planKey(key, rec); {
	case action == publishKey:
		return step{kind: stepPublish, gen: gen, found: found}
	case action == issueKey && !found.expired:
		return step{kind: stepIssue, gen: gen, grace: gracePeriod(key, rec, s.now), found: found}
	case action == issueKey && gen == 1:
		// Expired before its first key: none is ever issued.
		return step{found: found}
	}
	var wake requeue
	if !found.expired {
		if next, decided := planDelivery(s, rec, &found); decided {
			return next
		}
		if next, decided := planLife(s, rec, &found, p, &wake); decided {
			return next
		}
	}
	next := planUpkeep(s, rec, found, p)
	wake.at(next.after)
	next.after = wake.after
	return next
}

// keyAction is what the record of issuance asks of a reconcile.
type keyAction int

const (
	// keepKey: the issued key stands and the status says so.
	keepKey keyAction = iota
	// issueKey: issue the next generation, the first key or a rotation not yet carried out.
	issueKey
	// publishKey: the status does not say what the hash Secret records; put it back.
	publishKey
)

// planKey decides from rec, the record of the hash Secret (nil when there is none), what key
// generation the APIKey should have and what to do about it. Without a hash Secret no key of
// this APIKey authenticates, so a forged status cannot end one: the status is all there is to
// go by (a first key, or the rotation that replaces a hash deleted by hand).
func planKey(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued) (keyAction, int64) {
	rotating := key.Spec.Rotation != nil
	requested := ""
	if rotating {
		requested = key.Spec.Rotation.RequestedAt
	}
	if rec == nil {
		gen := max(key.Status.KeyGeneration, 0)
		if gen == 0 || rotating && requested != key.Status.LastHandledRotationAt {
			return issueKey, gen + 1
		}
		return keepKey, gen
	}
	if rotating && requested != rec.RotationHandled {
		return issueKey, rec.Generation + 1
	}
	if key.Status.KeyGeneration != rec.Generation || key.Status.KeyHint != rec.Hint ||
		key.Status.LastHandledRotationAt != rec.RotationHandled {
		return publishKey, rec.Generation
	}
	return keepKey, rec.Generation
}

// planDelivery follows a delivered key: when the Secret spec.secretName names no longer holds
// it (deleted, or moved to a free name), a new key is issued into it, as cert-manager does with
// a deleted certificate Secret, and pods that still hold the old one keep working for a while.
// Someone else's Secret under that name is never touched: found.conflict says so and the key
// keeps working where it is. decided is false when delivery asks nothing of this reconcile.
func planDelivery(s *keyState, rec *keysecret.Issued, found *keyFindings) (next step, decided bool) {
	key := s.key
	if key.Spec.SecretName == "" || rec == nil || rec.Delivery == "" {
		return step{}, false
	}
	d := s.delivery
	switch {
	case d != nil && !keysecret.IsOwnedBy(d, key, keysecret.ComponentDelivery):
		found.conflict = deliveryConflict(key)
		return step{}, false
	case d != nil && keysecret.Generation(d) == rec.Generation && !keysecret.TemplateApplied(d, key):
		return step{kind: stepApplyTemplate, found: *found}, true
	case d != nil && keysecret.Generation(d) == rec.Generation:
		return step{}, false
	case !s.confirmed.delivery:
		// Absent from the cache (which keeps only Secrets labelled as switchboard's), or of
		// another generation there: the API server says which.
		return step{kind: stepCheckDelivery, found: *found}, true
	}
	return step{kind: stepIssue, gen: rec.Generation + 1, grace: RedeliveryGrace, lostHint: rec.Hint, found: *found}, true
}

// planUpkeep keeps an issued key's Secrets in line with its record: the hash Secret's record
// and grace period, the unclaimed reveal and its deadline, and reveal Secrets of older
// generations. The first of them that needs a write is the step.
func planUpkeep(s *keyState, rec *keysecret.Issued, found keyFindings, p planParams) step {
	key, now := s.key, s.now
	var next requeue
	if found.conflict != "" {
		next.at(conflictRetry)
	}
	done := func(kind stepKind) step {
		return step{kind: kind, found: found, after: next.after}
	}
	switch {
	case s.hash == nil && !s.confirmed.hash:
		return done(stepCheckHash)
	case s.hash == nil:
		// Deleted by hand: the key is refused until a rotation issues a new one.
		found.hash = hashMissing
	case keysecret.Generation(s.hash) < key.Status.KeyGeneration && !s.confirmed.hash:
		// The cache has not caught up with the rotation just made.
		return done(stepCheckHash)
	case keysecret.Generation(s.hash) < key.Status.KeyGeneration:
		next := done(stepNone)
		next.problem = fmt.Sprintf("hash Secret %s hashes key generation %d, the status says %d", s.hash.Name, keysecret.Generation(s.hash), key.Status.KeyGeneration)
		return next
	default:
		found.hash = hashFound
		if recordIncomplete(s.hash, key) {
			return done(stepCompleteRecord)
		}
		if until, ok := keysecret.PreviousValidUntil(s.hash); ok {
			if !now.Before(until) {
				return done(stepDropPrevious)
			}
			next.at(until.Sub(now))
		}
	}
	if key.Status.RevealSecretName != "" {
		deadline := revealDeadline(key, rec, now, p.revealTTL)
		expired := !now.Before(deadline)
		switch r := s.reveal; {
		case r != nil && keysecret.IsOwnedBy(r, key, keysecret.ComponentReveal) && expired:
			return done(stepExpireReveal)
		case r != nil && keysecret.IsOwnedBy(r, key, keysecret.ComponentReveal):
			next.at(deadline.Sub(now))
		case !s.confirmed.reveal:
			return done(stepCheckReveal)
		case expired:
			// Gone (or someone else's under that name), and the deadline passed.
			found.reveal = switchboardv1alpha1.ReasonRevealExpired
		default:
			// Gone before the deadline: someone claimed it.
			found.reveal = switchboardv1alpha1.ReasonRevealClaimed
		}
	}
	for _, r := range s.reveals {
		if keysecret.Generation(r) < key.Status.KeyGeneration {
			return done(stepSweep)
		}
	}
	if !found.expired && found.hash == hashFound && key.Spec.ExpiresAt != nil {
		next.at(key.Spec.ExpiresAt.Sub(now))
	}
	return done(stepNone)
}

// recordIncomplete says hash, of the status's generation, lacks what the record of issuance
// keeps: written by an older switchboard (no hint), or before deadlines were recorded while a
// reveal is pending, or before deliveries were recorded for a delivered key.
func recordIncomplete(hash *corev1.Secret, key *switchboardv1alpha1.APIKey) bool {
	if keysecret.Generation(hash) != key.Status.KeyGeneration {
		return false
	}
	rec, ok := keysecret.IssuedOf(hash)
	switch {
	case !ok:
		return key.Status.KeyHint != ""
	case rec.RevealExpiresAt.IsZero() && key.Status.RevealSecretName != "":
		return true
	default:
		return rec.Delivery == "" && rec.RevealExpiresAt.IsZero() && legacyRecord(key, rec.Generation).Delivery != ""
	}
}

// revealDeadline is when the unclaimed reveal of the recorded key generation is deleted: the
// deadline its hash Secret records (rec), never the status's, which whoever may patch
// apikeys/status could move. A hash Secret written before switchboard recorded deadlines has
// none: then the status's deadline counts, but never later than revealTTL from now, and
// completeRecord writes it down so that it stops moving.
func revealDeadline(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, now time.Time, revealTTL time.Duration) time.Time {
	if rec != nil && !rec.RevealExpiresAt.IsZero() {
		return rec.RevealExpiresAt
	}
	limit := timePtr(now.Add(revealTTL)).Time
	if d := key.Status.RevealExpiresAt; d != nil && d.Time.Before(limit) {
		return d.Time
	}
	return limit
}

// gracePeriod is how long the key a rotation replaces stays valid: spec.rotation.gracePeriod,
// never past that key's own end.
func gracePeriod(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, now time.Time) time.Duration {
	if key.Spec.Rotation == nil {
		return 0
	}
	grace := key.Spec.Rotation.GracePeriod.Duration
	if rec != nil && !rec.NotAfter.IsZero() {
		grace = min(grace, max(rec.NotAfter.Sub(now), 0))
	}
	return grace
}

// requeue keeps the soonest of several wake-up delays.
type requeue struct{ after time.Duration }

// at asks to run again after d (d <= 0 means no request).
func (q *requeue) at(d time.Duration) {
	if d <= 0 {
		return
	}
	if q.after == 0 || d < q.after {
		q.after = d
	}
}
