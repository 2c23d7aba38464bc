package apikey

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The policies of the APIKey reconciler, in the order they are asked: each decides one thing
// from an input and says why; the first that decides settles the reconcile. TestPolicies has a
// table for each, TestPlan the chain as a whole.
var apiKeyPolicies = chain{
	// The object's own life: orphans of a deleted namesake, deletion, the finalizer.
	{"OrphanHashes", orphanHashes},
	{"APIKeyGone", apiKeyGone},
	{"BeingDeleted", beingDeleted},
	{"NoFinalizer", noFinalizer},
	// Revocation, final: the user's spec, or the operator's own record.
	{"Revoked", revoked},
	// A leaked key: refused at once, and replaced with no grace, before anything else is done.
	{"Leaked", leaked},
	{"LeakRollout", leakRollout},
	// The record of issuance: a first key, a rotation, a status to put back.
	{"StatusBehindRecord", statusBehindRecord},
	{"KeyToIssue", keyToIssue},
	{"ExpiredBeforeFirstKey", expiredBeforeFirstKey},
	// Delivery: spec.secretName holds the delivered key, with spec.secretTemplate.
	{"TemplateNotApplied", templateNotApplied},
	{"DeliveryUnconfirmed", deliveryUnconfirmed},
	{"DeliveryLost", deliveryLost},
	// The key's life: revokeWhenUnusedFor, lifetime, renewal.
	{"UnusedTooLong", unusedTooLong},
	{"LifetimeNotRecorded", lifetimeNotRecorded},
	{"RenewalDue", renewalDue},
	// Upkeep: the hash Secret's record and grace period, the unclaimed reveal, old reveals.
	{"HashUnconfirmed", hashUnconfirmed},
	{"HashBehindStatus", hashBehindStatus},
	{"RecordIncomplete", recordToComplete},
	{"GraceEndsOnEvidence", graceEndsOnEvidence},
	{"GraceEnded", graceEnded},
	{"RevealDeadlinePassed", revealDeadlinePassed},
	{"RevealUnconfirmed", revealUnconfirmed},
	{"OldReveals", oldReveals},
}

// orphanHashes: hash Secrets labelled for this name whose APIKey is gone are deleted first.
func orphanHashes(in input) (decision, bool) {
	if len(in.s.orphans) == 0 {
		return decision{}, false
	}
	return decision{do: deleteOrphans{}, why: fmt.Sprintf("%d hash Secrets of a deleted APIKey of this name", len(in.s.orphans))}, true
}

// apiKeyGone: without an APIKey there is nothing else to do.
func apiKeyGone(in input) (decision, bool) {
	return decision{why: "no APIKey of this name"}, in.s.key == nil
}

// beingDeleted: a deleted APIKey's Secrets go, then its finalizer.
func beingDeleted(in input) (decision, bool) {
	key := in.s.key
	switch {
	case key.DeletionTimestamp.IsZero():
		return decision{}, false
	case controllerutil.ContainsFinalizer(key, switchboardv1alpha1.FinalizerAPIKey):
		return decision{do: cleanUp{}, why: "deleted"}, true
	}
	return decision{why: "deleted, finalizer gone"}, true
}

// noFinalizer: the finalizer comes before any hash exists, so that no hash outlives its APIKey.
func noFinalizer(in input) (decision, bool) {
	if controllerutil.ContainsFinalizer(in.s.key, switchboardv1alpha1.FinalizerAPIKey) {
		return decision{}, false
	}
	return decision{do: addFinalizer{}, why: "no finalizer"}, true
}

// revoked: a revoked key (spec.revoked, which the API server keeps true for good, or the
// operator's own revocation in the hash Secret, which it never removes) has its reveal Secrets
// deleted, and for spec.revoked its hash; settled once nothing of the key is left. A hash Secret
// recording the operator's revocation stays: without it a new key would be issued.
func revoked(in input) (decision, bool) {
	s, key := in.s, in.s.key
	if !in.obs.revoked {
		return decision{}, false
	}
	leftHash := key.Spec.Revoked && s.hash != nil
	if leftHash || len(s.reveals) > 0 || key.Status.RevealSecretName != "" || key.Status.PreviousKeyValidUntil != nil {
		return decision{do: revoke{}, why: "revoked, its Secrets not all gone"}, true
	}
	return decision{why: "revoked"}, true
}

// statusBehindRecord: the status does not say what the hash Secret records; put it back.
func statusBehindRecord(in input) (decision, bool) {
	action, gen := planKey(in.s.key, in.obs.rec)
	if action != publishKey {
		return decision{}, false
	}
	return decision{do: publish{}, gen: gen, why: "the status does not say what the hash Secret records"}, true
}

// keyToIssue: a first key, or a rotation the record has not carried out, for a key not expired.
func keyToIssue(in input) (decision, bool) {
	s := in.s
	action, gen := planKey(s.key, in.obs.rec)
	if action != issueKey || in.obs.expired {
		return decision{}, false
	}
	return decision{do: issue{grace: gracePeriod(s.key, in.obs.rec, s.now)}, gen: gen, why: "a first key or a rotation"}, true
}

// expiredBeforeFirstKey: an APIKey that expired before its first key never gets one.
func expiredBeforeFirstKey(in input) (decision, bool) {
	action, gen := planKey(in.s.key, in.obs.rec)
	return decision{why: "expired before its first key"}, action == issueKey && gen == 1 && in.obs.expired
}

// deliveredAndOurs is the delivery Secret of a delivered key that is the APIKey's (nil: none,
// the key is not delivered, someone else's Secret is there, or the key expired).
func deliveredAndOurs(in input) (rec *keysecret.Issued, followed bool) {
	s, rec := in.s, in.obs.rec
	if in.obs.expired || s.key.Spec.SecretName == "" || rec == nil || rec.Delivery == "" || in.obs.conflict != "" {
		return nil, false
	}
	return rec, true
}

// templateNotApplied: the delivery Secret holds the delivered key but not spec.secretTemplate's
// labels and annotations.
func templateNotApplied(in input) (decision, bool) {
	rec, ok := deliveredAndOurs(in)
	d := in.s.delivery
	if !ok || d == nil || keysecret.Generation(d) != rec.Generation || keysecret.TemplateApplied(d, in.s.key) {
		return decision{}, false
	}
	return decision{do: applyTemplate{}, why: "spec.secretTemplate not applied"}, true
}

// deliveryUnconfirmed: the delivery Secret is absent from the cache (which keeps only Secrets
// labelled as switchboard's), or of another generation there: the API server says which.
func deliveryUnconfirmed(in input) (decision, bool) {
	rec, ok := deliveredAndOurs(in)
	d := in.s.delivery
	if !ok || d != nil && keysecret.Generation(d) == rec.Generation || in.s.confirmed.delivery {
		return decision{}, false
	}
	return decision{do: checkDelivery{}, why: "the delivery Secret does not hold the key in the cache"}, true
}

// deliveryLost: the Secret spec.secretName names no longer holds the delivered key (deleted, or
// moved to a free name): a new key is issued into it, as cert-manager does with a deleted
// certificate Secret, and pods that still hold the old one keep working for RedeliveryGrace.
func deliveryLost(in input) (decision, bool) {
	rec, ok := deliveredAndOurs(in)
	d := in.s.delivery
	if !ok || d != nil && keysecret.Generation(d) == rec.Generation {
		return decision{}, false
	}
	return decision{do: issue{grace: RedeliveryGrace, lostHint: rec.Hint}, gen: rec.Generation + 1, why: "the delivery Secret lost the key"}, true
}

// unusedTooLong: a key unused for spec.revokeWhenUnusedFor is revoked for good, in its hash
// Secret (without one the key is refused anyway).
func unusedTooLong(in input) (decision, bool) {
	s, l := in.s, &in.obs.life
	d := s.key.Spec.RevokeWhenUnusedFor
	if !l.known || d == nil || s.hash == nil || s.now.Before(l.lastActivity.Add(d.Duration)) {
		return decision{}, false
	}
	return decision{do: revokeUnused{lastActivity: l.lastActivity}, why: "unused for spec.revokeWhenUnusedFor"}, true
}

// lifetimeNotRecorded: a lifetime set, changed or removed after the key was issued applies to
// it too: the record's end is written again.
func lifetimeNotRecorded(in input) (decision, bool) {
	rec := in.obs.rec
	if !in.obs.life.known || rec == nil {
		return decision{}, false
	}
	want, ok := wantNotAfter(in.s.key, rec.IssuedAt)
	if ok && want.Equal(rec.NotAfter) {
		return decision{}, false
	}
	return decision{do: recordLife{}, why: "the record's lifetime is not the spec's"}, true
}

// renewalDue: a delivered key at its renewal time is replaced in its delivery Secret; the old
// one stays valid until its own end.
func renewalDue(in input) (decision, bool) {
	s, l, rec := in.s, &in.obs.life, in.obs.rec
	if !l.known || !l.renews || s.now.Before(l.renewAt) {
		return decision{}, false
	}
	return decision{do: issue{grace: max(l.notAfter.Sub(s.now), 0), renewal: true}, gen: rec.Generation + 1, why: "renewal due"}, true
}

// hashUnconfirmed: no hash Secret in the cache for an issued key, or one behind the status: the
// cache may not have caught up with the last issue, the API server says.
func hashUnconfirmed(in input) (decision, bool) {
	s := in.s
	if s.confirmed.hash || s.hash != nil && keysecret.Generation(s.hash) >= s.key.Status.KeyGeneration {
		return decision{}, false
	}
	return decision{do: checkHash{}, why: "the cache shows no hash Secret of the status's generation"}, true
}

// hashBehindStatus: the API server's hash Secret hashes an older generation than the status
// says: a state the operator cannot repair (the status was not published from it).
func hashBehindStatus(in input) (decision, bool) {
	s := in.s
	if s.hash == nil || keysecret.Generation(s.hash) >= s.key.Status.KeyGeneration {
		return decision{}, false
	}
	return problemf("hash Secret %s hashes key generation %d, the status says %d", s.hash.Name, keysecret.Generation(s.hash), s.key.Status.KeyGeneration), true
}

// recordToComplete: a hash Secret of an older switchboard gets what the record of issuance
// keeps written down, once.
func recordToComplete(in input) (decision, bool) {
	if in.obs.hash != hashFound || !recordIncomplete(in.s.hash, in.s.key) {
		return decision{}, false
	}
	return decision{do: completeRecord{}, why: "the hash Secret's record is incomplete"}, true
}

// graceEnded: the previous key's grace period ended; its hash goes.
func graceEnded(in input) (decision, bool) {
	if in.obs.hash != hashFound {
		return decision{}, false
	}
	until, ok := keysecret.PreviousValidUntil(in.s.hash)
	if !ok || in.s.now.Before(until) {
		return decision{}, false
	}
	return decision{do: dropPrevious{}, why: "the previous key's grace period ended"}, true
}

// revealDeadlinePassed: the unclaimed reveal Secret whose recorded deadline passed is deleted.
func revealDeadlinePassed(in input) (decision, bool) {
	s := in.s
	if s.key.Status.RevealSecretName == "" || s.reveal == nil || !keysecret.IsOwnedBy(s.reveal, s.key, keysecret.ComponentReveal) ||
		s.now.Before(in.obs.revealDeadline) {
		return decision{}, false
	}
	return decision{do: expireReveal{}, why: "nobody claimed the key before its reveal's deadline"}, true
}

// revealUnconfirmed: no reveal Secret in the cache where the status publishes one: claimed, or
// the cache is behind; the API server says.
func revealUnconfirmed(in input) (decision, bool) {
	s := in.s
	if s.key.Status.RevealSecretName == "" || s.confirmed.reveal || s.reveal != nil && keysecret.IsOwnedBy(s.reveal, s.key, keysecret.ComponentReveal) {
		return decision{}, false
	}
	return decision{do: checkReveal{}, why: "the published reveal Secret is not in the cache"}, true
}

// oldReveals: reveal Secrets of generations the status no longer publishes are deleted.
func oldReveals(in input) (decision, bool) {
	for _, r := range in.s.reveals {
		if keysecret.Generation(r) < in.s.key.Status.KeyGeneration {
			return decision{do: sweep{}, why: "reveal Secrets of older generations"}, true
		}
	}
	return decision{}, false
}
