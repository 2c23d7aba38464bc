// Package keystate is the one observed state every concern of the APIKey controller decides
// from: what a reconcile read of an APIKey and the Secrets around it (State), the facts read from
// that (Observation), and the terms the concerns answer in (named policies and their chain,
// decisions, actions and their outcomes, the Env they write with). It decides nothing itself.
package keystate

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// State is what a reconcile knows of an APIKey and the Secrets around it: read once, from the
// cache; confirm replaces parts of it with what the API server says, when a decision depends on
// them.
type State struct {
	// Name is the APIKey reconciled; Key is nil when there is no APIKey of that name.
	Name types.NamespacedName
	Key  *switchboardv1alpha1.APIKey
	// Now is the time the reconcile judges expiry, deadlines and grace periods at.
	Now time.Time

	// Hash is the APIKey's hash Secret, nil when there is none.
	Hash *corev1.Secret
	// Reveal is the Secret the status publishes as the unclaimed reveal Secret of the current
	// generation (under the one name the operator uses), nil when there is none.
	Reveal *corev1.Secret
	// Delivery is the Secret spec.secretName names, nil when there is none (or none the cache
	// keeps: it keeps only Secrets labelled as switchboard's).
	Delivery *corev1.Secret
	// Reveals are the reveal Secrets this APIKey controls, of any generation.
	Reveals []*corev1.Secret
	// Orphans are hash Secrets labelled for this APIKey's name whose UID is not its own.
	Orphans []*corev1.Secret
	// Leaks are the LeakReports of the system namespace for the hashes the hash Secret knows
	// of (current, previous, last leaked), by hash.
	Leaks map[string]*switchboardv1alpha1.LeakReport
	// Consumers are the pods that take the delivery Secret and need a restart to see a new
	// key, read only when the old key's grace may end on evidence (grace.NeedsConsumers); nil:
	// not read.
	Consumers *Consumers
	// Bound are the ServiceAccounts of the pods of the key's namespace that read its delivery
	// Secret, read only when spec.binding asks for its consumers (binding.NeedsPods); nil: not
	// read.
	Bound *BoundConsumers

	// Confirmed says which parts were read from the API server rather than the cache, by
	// confirm: an absence read there is an absence, one read from the cache may be the cache
	// being behind.
	Confirmed struct{ Key, Hash, Reveal, Delivery bool }
}

// Consumers is what a reconcile read of the pods that take the delivery Secret in a way that
// needs a restart to see a new key.
type Consumers struct {
	// Unreadable says why the namespace's workloads or pods could not be read ("" when they
	// were): the tenant has not bound switchboard the Role that lets it.
	Unreadable string
	// Holders name the pods that take the Secret by environment variable or subPath and started
	// before the new key was written, as "kind/workload: pod/name".
	Holders []string
	// Watched: a change of the namespace's pods wakes the key (internal/controller/apikey/podwatch).
	Watched bool
}

// BoundConsumers is what a reconcile read of the pods of a key's namespace that read its
// delivery Secret, for spec.binding.consumers.
type BoundConsumers struct {
	// Unreadable says why the namespace's pods could not be read ("" when they were): the
	// tenant has not bound switchboard the Role that lets it.
	Unreadable string
	// ServiceAccounts are the names of those pods' ServiceAccounts, sorted, each once.
	ServiceAccounts []string
	// Watched: a change of the namespace's pods wakes the key (internal/controller/apikey/podwatch).
	Watched bool
}

// Record is the record of issuance of the observed hash Secret (nil: none).
func (s *State) Record() *keysecret.Issued { return IssuedRecord(s.Key, s.Hash) }

// IssuedRecord is the record of issuance of hash Secret hash (nil: none). A hash Secret written
// before switchboard kept the record has only its generation: the rest is taken from the
// status until the record is completed (issuing's RecordIncomplete).
func IssuedRecord(key *switchboardv1alpha1.APIKey, hash *corev1.Secret) *keysecret.Issued {
	if hash == nil || keysecret.Generation(hash) == 0 {
		return nil
	}
	if rec, ok := keysecret.IssuedOf(hash); ok {
		return &rec
	}
	return LegacyRecord(key, keysecret.Generation(hash))
}

// LegacyRecord is what the status said of generation gen before the hash Secret recorded it:
// trusted until the record is completed, once. The reveal deadline is bounded by
// issuing.RevealDeadline; a delivery is taken from the Revealed condition.
func LegacyRecord(key *switchboardv1alpha1.APIKey, gen int64) *keysecret.Issued {
	rec := &keysecret.Issued{Generation: gen, Hint: key.Status.KeyHint, RotationHandled: key.Status.LastHandledRotationAt}
	if objstatus.ConditionReason(key.Status.Conditions, switchboardv1alpha1.ConditionRevealed) == switchboardv1alpha1.ReasonDelivered {
		rec.Delivery = key.Spec.SecretName
	}
	return rec
}

// Delivered says the key of rec sits in the delivery Secret spec.secretName names, so that a
// new one can be written there without a person.
func Delivered(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued) bool {
	return key.Spec.SecretName != "" && rec != nil && rec.Delivery == key.Spec.SecretName
}

// WantNotAfter is the end the record should give the current key: issuedAt + spec.lifetime;
// zero without a lifetime. ok is false when the record has no issue time to count from.
func WantNotAfter(key *switchboardv1alpha1.APIKey, issuedAt time.Time) (t time.Time, ok bool) {
	if key.Spec.Lifetime == nil {
		return time.Time{}, true
	}
	if issuedAt.IsZero() {
		return time.Time{}, false
	}
	return issuedAt.Add(key.Spec.Lifetime.Duration).Truncate(time.Second), true
}

// IsRevealSecretOf says whether secret is a reveal Secret the operator made for key: controlled
// by the APIKey, of the reveal type, and named for its generation label.
func IsRevealSecretOf(secret *corev1.Secret, key *switchboardv1alpha1.APIKey) bool {
	gen := keysecret.Generation(secret)
	return gen > 0 && secret.Name == keysecret.RevealName(key.Name, gen) && keysecret.IsOwnedBy(secret, key, keysecret.ComponentReveal)
}

// PreviousValidUntil reads when the previous key of a hash Secret stops working; nil when
// there is none.
func PreviousValidUntil(hash *corev1.Secret) *metav1.Time {
	t, ok := keysecret.PreviousValidUntil(hash)
	if !ok {
		return nil
	}
	return TimePtr(t)
}

// TimePtr is t as the API stores it: UTC, whole seconds.
func TimePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

// HintOf names the APIKey's key for people: its hint, or a word when none was issued.
func HintOf(key *switchboardv1alpha1.APIKey) string {
	if key.Status.KeyHint == "" {
		return "(none issued yet)"
	}
	return key.Status.KeyHint
}

// Observation is what the status reports of an APIKey, read from the observed state alone: the
// facts the policies decide from and the conditions are set from (with what the action did).
// Observe reads those every concern shares; each concern's observer adds its own.
type Observation struct {
	// Revoked: spec.revoked, or the operator's own revocation recorded in the hash Secret
	// (RevokedAt: when; zero for spec.revoked).
	Revoked   bool
	RevokedAt time.Time
	// Expired: spec.expiresAt has passed.
	Expired bool
	// Rec is the hash Secret's record of issuance (nil: none).
	Rec *keysecret.Issued
	// Conflict says why a delivered key cannot be written to spec.secretName: the Secret there
	// is someone else's.
	Conflict string
	// Hash is the state of the current key's hash Secret.
	Hash HashState
	// Reveal is what became of the one-time reveal, as a Revealed reason ("" when unchanged),
	// RevealDeadline when the published unclaimed reveal is deleted (zero: none published):
	// issuing's.
	Reveal         string
	RevealDeadline time.Time
	// Life is the current key's life (lifecycle's); known only for a key neither revoked nor
	// expired.
	Life Life
	// Grace is what the evidence says of the old key's grace (grace's).
	Grace GraceEvidence
	// Binding is spec.binding resolved into the record the server enforces (binding's).
	Binding BindingFinding
	// Wake is the soonest time alone changes a fact or a decision.
	Wake Requeue
}

// Observer adds a concern's facts of s to obs; it is asked only of an APIKey not revoked.
type Observer func(s *State, p Params, obs *Observation)

// Observe reads the facts of s every concern shares, then asks each observer for its own, as
// long as there is an APIKey and it is not revoked (nil key: no facts at all).
func Observe(s *State, p Params, observers ...Observer) *Observation {
	key := s.Key
	obs := &Observation{}
	if key == nil {
		return obs
	}
	obs.Rec = s.Record()
	switch {
	case key.Spec.Revoked:
		obs.Revoked = true
		return obs
	case obs.Rec != nil && obs.Rec.Revoked():
		obs.Revoked, obs.RevokedAt = true, obs.Rec.RevokedAt
		return obs
	}
	obs.Expired = key.Spec.ExpiresAt != nil && !s.Now.Before(key.Spec.ExpiresAt.Time)
	if !obs.Expired && key.Spec.SecretName != "" && obs.Rec != nil && obs.Rec.Delivery != "" && s.Delivery != nil &&
		!keysecret.IsOwnedBy(s.Delivery, key, keysecret.ComponentDelivery) {
		// The delivered key cannot be written to spec.secretName: the Secret there is someone else's.
		obs.Conflict = DeliveryConflict(key)
		obs.Wake.At(ConflictRetry)
	}
	// The hash Secret is missing when the API server says it is gone, unknown when only the
	// cache says so or it is behind the status's key generation.
	switch {
	case s.Hash == nil && s.Confirmed.Hash:
		obs.Hash = HashMissing
	case s.Hash != nil && keysecret.Generation(s.Hash) >= key.Status.KeyGeneration:
		obs.Hash = HashFound
	}
	for _, observe := range observers {
		observe(s, p, obs)
	}
	return obs
}

// HashState is what a reconcile learnt about the hash Secret of the current key.
type HashState int

// The states of the current key's hash Secret.
const (
	HashUnknown HashState = iota // not looked at, or the look failed
	HashFound
	HashMissing // deleted by hand: the key is refused
)

// DeliveryConflict says that spec.secretName names a Secret this APIKey does not manage.
func DeliveryConflict(key *switchboardv1alpha1.APIKey) string {
	return fmt.Sprintf("secret %s/%s exists and is not managed by switchboard for this APIKey; "+
		"switchboard will not overwrite it: delete it or choose another spec.secretName", key.Namespace, key.Spec.SecretName)
}

// Life is what the observation says of the current key's life (internal/controller/apikey/
// lifecycle reads it), for the policies, the status and the conditions.
type Life struct {
	// Known: the key is neither revoked nor expired, so the rest was read.
	Known bool
	// IssuedAt, NotAfter: from the record (zero: not recorded, or no end); End is NotAfter or
	// spec.expiresAt, whichever comes first.
	IssuedAt, NotAfter, End time.Time
	// RenewAt is when the key is renewed (zero: it is not); Renews says it renews itself,
	// into its delivery Secret (otherwise RenewAt only warns).
	RenewAt time.Time
	Renews  bool
	// Limited is the RenewalLimited message when the platform's minimum interval between
	// renewals held RenewAt back ("" when it did not).
	Limited string
	// Expiring is the ExpiringSoon reason when it is True ("" when False), with its message.
	Expiring, ExpiringMessage string
	// Unused: no use for the operator's unusedAfter; LastActivity is the latest use, or the
	// creation.
	Unused       bool
	LastActivity time.Time
	// Renewal: this reconcile's issue is an automatic renewal (set from the decision).
	Renewal bool
	// Ended: the current key's lifetime is over; the API server refuses it.
	Ended bool
}

// GraceEvidence is what the evidence says of the old key's grace (internal/controller/apikey/
// grace reads it), for the policy and the GraceEvidence condition.
type GraceEvidence struct {
	// Active: the key asks for it and an old key is in its grace.
	Active bool
	// Moved: the old key's consumers have moved; its grace ends now.
	Moved bool
	// Ended: its grace already ended on evidence, as the hash Secret records
	// (keysecret.EndPreviousEarly); nothing is left to do.
	Ended bool
	// Reason and Message are the GraceEvidence condition's.
	Reason, Message string
}

// BindingFinding is spec.binding resolved into the record the server enforces (internal/
// controller/apikey/binding reads it), for its policy and the WorkloadBinding condition.
type BindingFinding struct {
	// Known: spec.binding was resolved (the rest was read).
	Known bool
	// Want is the record the hash Secret should hold (nil: none, a bearer key); Recorded says
	// it holds it.
	Want     *keysecret.Binding
	Recorded bool
	// Reason and Message are the WorkloadBinding condition's, True when Healthy.
	Reason, Message string
	Healthy         bool
}

// Requeue keeps the soonest of several wake-up delays.
type Requeue struct{ After time.Duration }

// At asks to run again after d (d <= 0 means no request).
func (q *Requeue) At(d time.Duration) {
	if d <= 0 {
		return
	}
	if q.After == 0 || d < q.After {
		q.After = d
	}
}
