package apikey

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
)

// Plan: the second step of a reconcile, and a pure function of what was observed (keyState).
// It reads the facts the status reports (an observation: revoked, expired, the hash Secret, the
// reveal, the key's life) and asks a chain of named policies, in order, what to do; the first
// policy that decides ends the chain, and says why (apikey_policies.go; as cert-manager's
// certificates trigger does). The decisions rest on what switchboard wrote where tenants and
// the server cannot write (the hash Secret's record of issuance, owner references with UIDs) and
// on the tenant's spec; a status field is never a reason to write anything.

// planParams are the operator's settings that decisions depend on.
type planParams struct {
	revealTTL time.Duration
	// expiryWarning and unusedAfter: ExpiringSoon and Unused (apikey_lifecycle.go).
	expiryWarning, unusedAfter time.Duration
	// minRenewal is the least interval between two renewals of a key (earliestRenewal).
	minRenewal renewalinterval.Minimum
}

// input is what a policy decides from: the observed state, the facts read from it, the settings.
type input struct {
	s   *keyState
	obs *observation
	p   planParams
}

// policyFunc decides one thing: whether it settles this reconcile (decided), and with what
// decision (an action, or none when nothing is to be done). A policy that has nothing to say
// returns false and the chain goes on.
type policyFunc func(in input) (d decision, decided bool)

// policy is a named policyFunc: its name says what it decides, in logs and in the tests.
type policy struct {
	name   string
	decide policyFunc
}

// chain is a list of policies evaluated in order; the first that decides wins.
type chain []policy

// evaluate returns the decision of the first policy that decides, named after it; none when no
// policy does.
func (c chain) evaluate(in input) decision {
	for _, p := range c {
		if d, ok := p.decide(in); ok {
			d.policy = p.name
			return d
		}
	}
	return decision{}
}

// decision is what the plan asks of a reconcile, and why.
type decision struct {
	// policy names the policy that decided ("" when none did).
	policy string
	// why says, for the log, what the policy saw.
	why string
	// do is the action to carry out (nil: none; the status is still written).
	do action
	// gen is the key generation an issue issues, or a publication publishes.
	gen int64
	// problem is a state the operator cannot repair; the reconcile fails with it.
	problem string
}

// observation is what the status reports of an APIKey, read from the observed state alone: the
// facts the policies decide from and the conditions are set from (with what act did).
type observation struct {
	// revoked: spec.revoked, or the operator's own revocation recorded in the hash Secret
	// (revokedAt: when; zero for spec.revoked).
	revoked   bool
	revokedAt time.Time
	// expired: spec.expiresAt has passed.
	expired bool
	// rec is the hash Secret's record of issuance (nil: none).
	rec *keysecret.Issued
	// conflict says why a delivered key cannot be written to spec.secretName: the Secret there
	// is someone else's.
	conflict string
	// hash is the state of the current key's hash Secret.
	hash hashState
	// reveal is what became of the one-time reveal, as a Revealed reason ("" when unchanged).
	reveal string
	// revealDeadline is when the published unclaimed reveal is deleted (zero: none published).
	revealDeadline time.Time
	// life is the current key's life (apikey_lifecycle.go); known only for a key neither
	// revoked nor expired.
	life life
	// grace is what the evidence says of the old key's grace (grace.go).
	grace graceEvidence
	// wake is the soonest time alone changes a fact or a decision.
	wake requeue
}

// observe reads the facts of s (nil key: none).
func observeFacts(s *keyState, p planParams) *observation {
	key := s.key
	obs := &observation{}
	if key == nil {
		return obs
	}
	obs.rec = s.record()
	switch {
	case key.Spec.Revoked:
		obs.revoked = true
		return obs
	case obs.rec != nil && obs.rec.Revoked():
		obs.revoked, obs.revokedAt = true, obs.rec.RevokedAt
		return obs
	}
	obs.expired = key.Spec.ExpiresAt != nil && !s.now.Before(key.Spec.ExpiresAt.Time)
	if !obs.expired {
		obs.conflict = deliveryConflictOf(s, obs.rec)
		if obs.conflict != "" {
			obs.wake.at(conflictRetry)
		}
		obs.life = lifeOf(s, obs.rec, p, &obs.wake)
	}
	obs.hash = hashStateOf(s)
	if obs.hash == hashFound {
		if until, ok := keysecret.PreviousValidUntil(s.hash); ok && s.now.Before(until) {
			obs.wake.at(until.Sub(s.now))
		}
		if l, ok := keysecret.LeakOf(s.hash); ok && s.now.Before(l.ReplaceAfter) {
			// A leaked key's held replacement is issued then (leakOf).
			obs.wake.at(l.ReplaceAfter.Sub(s.now))
		}
		if !obs.expired {
			obs.grace = graceEvidenceOf(s, obs.rec, &obs.wake)
		}
	}
	if key.Status.RevealSecretName != "" {
		obs.revealDeadline = revealDeadline(key, obs.rec, s.now, p.revealTTL)
		obs.reveal = revealOf(s, obs.revealDeadline)
		if obs.reveal == "" && s.now.Before(obs.revealDeadline) {
			obs.wake.at(obs.revealDeadline.Sub(s.now))
		}
	}
	if !obs.expired && obs.hash == hashFound && key.Spec.ExpiresAt != nil {
		obs.wake.at(key.Spec.ExpiresAt.Sub(s.now))
	}
	return obs
}

// deliveryConflictOf says why the delivered key of rec cannot be written to spec.secretName:
// the Secret there is someone else's ("" when it is not).
func deliveryConflictOf(s *keyState, rec *keysecret.Issued) string {
	key := s.key
	if key.Spec.SecretName == "" || rec == nil || rec.Delivery == "" || s.delivery == nil ||
		keysecret.IsOwnedBy(s.delivery, key, keysecret.ComponentDelivery) {
		return ""
	}
	return deliveryConflict(key)
}

// hashStateOf says what the observed hash Secret is to the status's key generation: found, or
// missing (read from the API server, which says it is gone), or unknown (not confirmed yet, or
// behind the status).
func hashStateOf(s *keyState) hashState {
	switch {
	case s.hash == nil && s.confirmed.hash:
		return hashMissing
	case s.hash == nil, keysecret.Generation(s.hash) < s.key.Status.KeyGeneration:
		return hashUnknown
	}
	return hashFound
}

// revealOf says what became of the published unclaimed reveal: "" while its Secret is there
// (or its absence is only the cache's), claimed when it went before deadline, expired after.
func revealOf(s *keyState, deadline time.Time) string {
	switch r := s.reveal; {
	case r != nil && keysecret.IsOwnedBy(r, s.key, keysecret.ComponentReveal), !s.confirmed.reveal:
		return ""
	case !s.now.Before(deadline):
		// Gone (or someone else's under that name), and the deadline passed.
		return switchboardv1alpha1.ReasonRevealExpired
	default:
		// Gone before the deadline: someone claimed it.
		return switchboardv1alpha1.ReasonRevealClaimed
	}
}

// plan reads the facts of s and asks the chain of policies what to do.
func plan(s *keyState, p planParams) (*observation, decision) {
	obs := observeFacts(s, p)
	return obs, apiKeyPolicies.evaluate(input{s: s, obs: obs, p: p})
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

// problemf is a decision to fail the reconcile with a state the operator cannot repair.
func problemf(format string, args ...any) decision {
	return decision{problem: fmt.Sprintf(format, args...)}
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
