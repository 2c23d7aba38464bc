package apikey

import (
	"fmt"
	"strings"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Grace that ends on evidence (spec.graceEndsWhenUnusedFor): the old key of a rotation stops
// being accepted before its fixed grace ends once its consumers have moved to the new key. The
// evidence is (a) the old key's record of use, status.previousKeyUse, which only the server may
// write and only forward (its admission policy), measured from when the new key was written,
// which the hash Secret records; and (b) the pods that take the delivery Secret by environment
// variable or subPath, which see a new key only when they restart, all started (their
// metadata.creationTimestamp, which the API server sets) after that. The fixed grace stays the
// upper bound: evidence only ever shortens it.

// consumersRetry is how often pods that still hold the old key, or a namespace whose workloads
// switchboard may not read, are looked at again when nothing wakes the operator when they
// change; consumersResync when their namespace's pods are watched (internal/podwatch), and a
// change wakes the key at once.
const (
	consumersRetry  = 30 * time.Second
	consumersResync = 10 * time.Minute
)

// maxHoldersShown bounds the pods the GraceEvidence condition names.
const maxHoldersShown = 10

// consumerState is what a reconcile read of the pods that take the delivery Secret in a way
// that needs a restart to see a new key.
type consumerState struct {
	// unreadable says why the namespace's workloads or pods could not be read ("" when they
	// were): the tenant has not bound switchboard the Role that lets it.
	unreadable string
	// holders name the pods that take the Secret by environment variable or subPath and started
	// before the new key was written, as "kind/workload: pod/name".
	holders []string
	// watched: a change of the namespace's pods wakes the key (internal/podwatch).
	watched bool
}

// graceEvidence is what the evidence says of the old key's grace, for the policy and the
// GraceEvidence condition.
type graceEvidence struct {
	// active: the key asks for it and an old key is in its grace.
	active bool
	// moved: the old key's consumers have moved; its grace ends now.
	moved bool
	// ended: its grace already ended on evidence, as the hash Secret records
	// (keysecret.EndPreviousEarly); nothing is left to do.
	ended bool
	// reason and message are the GraceEvidence condition's.
	reason, message string
	// quietUntil is when the old key's quiet period ends if it stays unused; consumers are
	// read only from then on (needsConsumers).
	quietUntil time.Time
}

// quietUntil is when the old key of s's rotation will have gone unused for
// spec.graceEndsWhenUnusedFor since the new key was written (rec.IssuedAt), by its last use of
// that generation; the old key's generation and last use come with it. ok is false when the
// grace does not end on evidence: not asked for, no old key in its grace, or no record of
// when the new key was written.
func quietUntil(s *keyState, rec *keysecret.Issued) (until, lastUse time.Time, gen int64, ok bool) {
	key := s.key
	quiet := key.Spec.GraceEndsWhenUnusedFor
	if quiet == nil || s.hash == nil || rec == nil || rec.IssuedAt.IsZero() {
		return time.Time{}, time.Time{}, 0, false
	}
	if end, has := keysecret.PreviousValidUntil(s.hash); !has || !s.now.Before(end) {
		return time.Time{}, time.Time{}, 0, false
	}
	gen = rec.Generation - 1
	lastUse = rec.IssuedAt
	if u := key.Status.PreviousKeyUse; u != nil && u.KeyGeneration == gen && u.LastUsedAt.After(lastUse) {
		lastUse = u.LastUsedAt.Time
	}
	return lastUse.Add(quiet.Duration), lastUse, gen, true
}

// needsConsumers says whether the reconcile of s must read the pods that take its delivery
// Secret: the grace ends on evidence, the old key's traffic has stopped for the quiet period,
// and the key is delivered (a revealed key has no Secret for pods to take it from).
func needsConsumers(s *keyState, rec *keysecret.Issued) bool {
	until, _, _, ok := quietUntil(s, rec)
	return ok && !s.now.Before(until) && delivered(s.key, rec)
}

// graceEvidenceOf reads the evidence of s's old key's grace; wake gets when it is worth
// looking again.
func graceEvidenceOf(s *keyState, rec *keysecret.Issued, wake *requeue) graceEvidence {
	until, lastUse, gen, ok := quietUntil(s, rec)
	if !ok {
		if rec != nil && rec.PreviousEndedEarly != "" && s.key.Spec.GraceEndsWhenUnusedFor != nil {
			// Said from the record, not from the status the early end was first reported in:
			// that status patch may have been lost.
			return graceEvidence{active: true, ended: true, reason: switchboardv1alpha1.ReasonConsumersMoved, message: rec.PreviousEndedEarly}
		}
		return graceEvidence{}
	}
	key, now := s.key, s.now
	end, _ := keysecret.PreviousValidUntil(s.hash)
	written := rec.IssuedAt.UTC().Format(time.RFC3339)
	used := fmt.Sprintf("key generation %d has not been used since key generation %d was written at %s", gen, rec.Generation, written)
	if lastUse.After(rec.IssuedAt) {
		used = fmt.Sprintf("key generation %d was last used at %s", gen, lastUse.UTC().Format(time.RFC3339))
	}
	e := graceEvidence{active: true, quietUntil: until}
	bound := fmt.Sprintf("at the latest at %s", end.UTC().Format(time.RFC3339))
	switch {
	case now.Before(until):
		wake.at(until.Sub(now))
		e.reason = switchboardv1alpha1.ReasonPreviousKeyInUse
		e.message = fmt.Sprintf("%s; its grace ends at %s if it stays unused (spec.graceEndsWhenUnusedFor %s), %s", used,
			until.UTC().Format(time.RFC3339), key.Spec.GraceEndsWhenUnusedFor.Duration, bound)
	case !delivered(key, rec):
		e.moved, e.reason = true, switchboardv1alpha1.ReasonConsumersMoved
		e.message = fmt.Sprintf("%s, longer than spec.graceEndsWhenUnusedFor (%s); the key is not delivered into a Secret, so no pod is judged: its grace ended on traffic alone",
			used, key.Spec.GraceEndsWhenUnusedFor.Duration)
	case s.consumers == nil:
		// Not read (needsConsumers was false when observed): look again at once.
		wake.at(staleRetry)
		e.reason = switchboardv1alpha1.ReasonPodsHoldPreviousKey
		e.message = fmt.Sprintf("%s; the pods that take Secret %s are not read yet; its grace ends %s", used, key.Spec.SecretName, bound)
	case s.consumers.unreadable != "":
		wake.at(consumersRetry)
		e.reason = switchboardv1alpha1.ReasonWorkloadsNotReadable
		e.message = fmt.Sprintf("%s, but switchboard may not read the workloads and pods of namespace %s (%s): bind it the Role switchboard-consumer-reader there to let their restarts end the grace early; until then it ends %s",
			used, key.Namespace, s.consumers.unreadable, bound)
	case len(s.consumers.holders) > 0:
		if s.consumers.watched {
			wake.at(consumersResync)
		} else {
			wake.at(consumersRetry)
		}
		e.reason = switchboardv1alpha1.ReasonPodsHoldPreviousKey
		e.message = fmt.Sprintf("%s, but %s started before key generation %d was written at %s and take%s Secret %s by environment variable or subPath, so they still hold the old key: restart them (kubectl rollout restart); its grace ends when they have, %s",
			used, holdersText(s.consumers.holders), rec.Generation, written, map[bool]string{true: "s", false: ""}[len(s.consumers.holders) == 1], key.Spec.SecretName, bound)
	default:
		e.moved, e.reason = true, switchboardv1alpha1.ReasonConsumersMoved
		e.message = fmt.Sprintf("%s, longer than spec.graceEndsWhenUnusedFor (%s), and every pod that takes Secret %s by environment variable or subPath started after it was written: its grace ended",
			used, key.Spec.GraceEndsWhenUnusedFor.Duration, key.Spec.SecretName)
	}
	return e
}

// holdersText names the pods that hold the old key, at most maxHoldersShown of them.
func holdersText(holders []string) string {
	switch {
	case len(holders) == 1:
		return "pod " + holders[0]
	case len(holders) <= maxHoldersShown:
		return "pods " + strings.Join(holders, ", ")
	}
	return fmt.Sprintf("pods %s and %d more", strings.Join(holders[:maxHoldersShown], ", "), len(holders)-maxHoldersShown)
}

// graceEndsOnEvidence: the old key's consumers have moved (graceEvidenceOf), so its hash goes
// before the fixed grace ends.
func graceEndsOnEvidence(in input) (decision, bool) {
	if in.obs.hash != hashFound || !in.obs.grace.moved {
		return decision{}, false
	}
	return decision{do: dropPrevious{early: in.obs.grace.message}, why: "the old key's consumers have moved (spec.graceEndsWhenUnusedFor)"}, true
}
