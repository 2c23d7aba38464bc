package apikey

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller"
	"github.com/switchboard-dev/switchboard/internal/controller/keyjournal"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// hashState is what a reconcile learnt about the hash Secret of the current key.
type hashState int

const (
	hashUnknown hashState = iota // not looked at, or the look failed
	hashFound
	hashMissing // deleted by hand: the key is refused
)

// keyFindings is what one reconcile of an APIKey found and did, as the status reports it: read
// by findingsOf from the observation and the outcome of the action. The conditions are then
// set from it, once, in setKeyConditions, and the Events of the transitions from comparing the
// status before and after (recordTransitions). A field left at its zero value means "not found
// out": an error stopped the reconcile first, and the condition it decides keeps its value.
type keyFindings struct {
	// revoked: spec.revoked (which the API server never lets go back to false), or the
	// operator's own revocation recorded in the hash Secret (revokedAt), which is final too.
	revoked bool
	// revokedAt is when the operator revoked the key for want of use, as its hash Secret
	// records (zero: it did not).
	revokedAt time.Time
	// expired: spec.expiresAt has passed.
	expired bool
	// issuing is the key generation an issue started for (0: none).
	issuing int64
	// conflict says why that issue cannot go on: a Secret it must write is not the APIKey's.
	conflict string
	// issued: this reconcile published a new key generation.
	issued bool
	// hash is the state of the current key's hash Secret.
	hash hashState
	// reveal is what became of the one-time reveal, as a Revealed reason ("" when unchanged).
	reveal string
	// lostHint is the hint of a delivered key whose Secret no longer held it; a new key was
	// issued into the Secret.
	lostHint string
	// restored: the status did not say what the hash Secret records, and was put back.
	restored bool
	// life is the current key's life (apikey_lifecycle.go).
	life life
	// leak is the last leak the hash Secret records (nil: none, or the hash Secret not seen),
	// leakRefused says this reconcile recorded it, leakRolled that it rolled the workloads
	// reading its delivery Secret (or found it may not).
	leak        *leakFinding
	leakRefused bool
	leakRolled  bool
	// grace is what the evidence says of the old key's grace (grace.go).
	grace graceEvidence
	// renewedUntil is, for a renewal, when the key it replaced stops being accepted (zero:
	// it already is not).
	renewedUntil time.Time
}

// findingsOf is what the status reports of an APIKey observed as obs after decision d was
// carried out with outcome out: what the action found replaces what was observed. life is the
// key's life, read again when the action wrote its record (an issue, a publication, a recorded
// lifetime).
func findingsOf(obs *observation, d decision, out outcome, life life) keyFindings {
	f := keyFindings{
		revoked: obs.revoked || !out.revokedAt.IsZero(), revokedAt: obs.revokedAt, expired: obs.expired,
		issuing: out.issuing, issued: out.issued, lostHint: out.lostHint, restored: out.restored,
		conflict: obs.conflict, hash: obs.hash, reveal: obs.reveal, life: life, grace: obs.grace,
	}
	if !out.revokedAt.IsZero() {
		f.revokedAt = out.revokedAt
	}
	if out.published || out.issuing > 0 {
		// The action wrote the key (or tried): what it found replaces what was observed.
		f.conflict, f.hash = out.conflict, hashUnknown
	}
	if out.hashFound {
		f.hash = hashFound
	}
	if out.reveal != "" {
		f.reveal = out.reveal
	}
	if i, ok := d.do.(issue); ok && i.renewal {
		f.life.renewal = true
		f.renewedUntil = life.notAfter // the life of the key it replaced (Reconcile)
	}
	if out.renewed {
		f.life.renewal = true
		f.renewedUntil = out.renewedUntil
	}
	return f
}

// setKeyConditions sets Ready and Revealed from what the reconcile found. It is the only place
// that sets them.
func setKeyConditions(key *switchboardv1alpha1.APIKey, f *keyFindings, systemNamespace string) {
	set := func(condType string, status metav1.ConditionStatus, reason, message string) {
		controller.SetCondition(&key.Status.Conditions, key.Generation, condType, status, reason, message)
	}
	const ready, revealed = switchboardv1alpha1.ConditionReady, switchboardv1alpha1.ConditionRevealed
	switch {
	case f.revoked && !f.revokedAt.IsZero() && !key.Spec.Revoked:
		set(ready, metav1.ConditionFalse, switchboardv1alpha1.ReasonUnusedRevoked,
			fmt.Sprintf("key %s was revoked at %s: unused for longer than spec.revokeWhenUnusedFor (recorded in hash Secret %s/%s). It is refused for good and a rotation issues no new key; create a new APIKey for one",
				hintOf(key), f.revokedAt.UTC().Format(time.RFC3339), systemNamespace, keysecret.HashName(key.UID)))
	case f.revoked:
		set(ready, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked,
			"the key is revoked (spec.revoked) and refused; create a new APIKey for a new key")
	case f.expired:
		set(ready, metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired,
			fmt.Sprintf("the key expired at %s (spec.expiresAt)", key.Spec.ExpiresAt.UTC().Format(time.RFC3339)))
	case f.leak != nil && !f.leak.replaced:
		set(ready, metav1.ConditionFalse, switchboardv1alpha1.ReasonLeaked, f.leak.readyMessage(key))
	case f.conflict != "":
		set(ready, metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict, f.conflict)
	case f.life.ended && !f.issued && f.life.limited != "":
		set(ready, metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired,
			fmt.Sprintf("key %s reached the end of its lifetime at %s (spec.lifetime) and is refused until its renewal at %s, held back by the platform's minimum interval between renewals (RenewalLimited)",
				key.Status.KeyHint, f.life.notAfter.UTC().Format(time.RFC3339), f.life.renewAt.UTC().Format(time.RFC3339)))
	case f.life.ended && !f.issued:
		set(ready, metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired,
			fmt.Sprintf("key %s reached the end of its lifetime at %s (spec.lifetime) and is refused; rotate it for a new key", key.Status.KeyHint, f.life.notAfter.UTC().Format(time.RFC3339)))
	case f.issued || f.hash == hashFound:
		set(ready, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued,
			fmt.Sprintf("key %s (generation %d) is valid", key.Status.KeyHint, key.Status.KeyGeneration))
	case f.hash == hashMissing:
		set(ready, metav1.ConditionFalse, switchboardv1alpha1.ReasonHashMissing,
			fmt.Sprintf("the hash Secret %s/%s of key %s is missing, so the key is refused; rotate the key to issue a new one",
				systemNamespace, keysecret.HashName(key.UID), key.Status.KeyHint))
	case f.issuing > 0 && key.Status.KeyGeneration == 0:
		// A rotation under way leaves Ready alone: the current key works until it is replaced.
		set(ready, metav1.ConditionFalse, switchboardv1alpha1.ReasonIssuing, fmt.Sprintf("issuing key generation %d", f.issuing))
	}

	setLifeConditions(key, f)
	setLeakCondition(key, f.leak)
	setGraceCondition(key, f)

	switch f.reveal {
	case switchboardv1alpha1.ReasonRevealPending:
		set(revealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealPending,
			fmt.Sprintf("claim key %s from Secret %s before %s (kubectl switchboard reveal %s)", key.Status.KeyHint,
				key.Status.RevealSecretName, key.Status.RevealExpiresAt.UTC().Format(time.RFC3339), key.Name))
	case switchboardv1alpha1.ReasonRevealClaimed:
		set(revealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonRevealClaimed,
			fmt.Sprintf("key %s was claimed; it is not stored anywhere else", key.Status.KeyHint))
	case switchboardv1alpha1.ReasonRevealExpired:
		set(revealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealExpired,
			fmt.Sprintf("nobody claimed key %s in time and its reveal Secret was deleted; the key stays valid: rotate it to get one you can see", key.Status.KeyHint))
	case switchboardv1alpha1.ReasonDelivered:
		set(revealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonDelivered,
			fmt.Sprintf("key %s is kept in Secret %s", key.Status.KeyHint, key.Spec.SecretName))
	case switchboardv1alpha1.ReasonRevoked:
		set(revealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked,
			fmt.Sprintf("key %s was revoked before anyone claimed it; its reveal Secret was deleted", key.Status.KeyHint))
	}
}

// setLifeConditions sets ExpiringSoon and Unused from what plan found of the key's life; a
// revoked or expired key has neither.
func setLifeConditions(key *switchboardv1alpha1.APIKey, f *keyFindings) {
	const expiring, unused, limited = switchboardv1alpha1.ConditionExpiringSoon, switchboardv1alpha1.ConditionUnused, switchboardv1alpha1.ConditionRenewalLimited
	if f.revoked || f.expired {
		meta.RemoveStatusCondition(&key.Status.Conditions, expiring)
		meta.RemoveStatusCondition(&key.Status.Conditions, unused)
		meta.RemoveStatusCondition(&key.Status.Conditions, limited)
		return
	}
	l := &f.life
	if !l.known {
		return
	}
	set := func(condType string, status metav1.ConditionStatus, reason, message string) {
		controller.SetCondition(&key.Status.Conditions, key.Generation, condType, status, reason, message)
	}
	if l.limited != "" {
		set(limited, metav1.ConditionTrue, switchboardv1alpha1.ReasonRenewsTooOften, l.limited)
	} else {
		meta.RemoveStatusCondition(&key.Status.Conditions, limited)
	}
	switch {
	case l.renewal || f.issued && f.issuing > 1:
		set(expiring, metav1.ConditionFalse, switchboardv1alpha1.ReasonRenewed, fmt.Sprintf("key %s replaced the previous one", key.Status.KeyHint))
	case l.expiring != "":
		set(expiring, metav1.ConditionTrue, l.expiring, l.expiringMessage)
	default:
		msg := "the key does not end on its own"
		switch {
		case key.Status.RenewalTime != nil:
			msg = fmt.Sprintf("key %s renews itself at %s", key.Status.KeyHint, key.Status.RenewalTime.UTC().Format(time.RFC3339))
		case key.Status.KeyNotAfter != nil:
			msg = fmt.Sprintf("key %s ends at %s", key.Status.KeyHint, key.Status.KeyNotAfter.UTC().Format(time.RFC3339))
		}
		set(expiring, metav1.ConditionFalse, switchboardv1alpha1.ReasonNotEndingSoon, msg)
	}
	since := l.lastActivity.UTC().Format(time.RFC3339)
	if l.unused {
		set(unused, metav1.ConditionTrue, switchboardv1alpha1.ReasonUnused, fmt.Sprintf("the key has not been used since %s (last use, or creation)", since))
	} else {
		set(unused, metav1.ConditionFalse, switchboardv1alpha1.ReasonUsed, fmt.Sprintf("last used, or created, at %s", since))
	}
}

// transition is one thing a reconcile changed that people and other systems are told of: a
// Kubernetes Event (reason "" when none), a key event (key.Type "" when none), or both. One
// list (transitions) feeds both, so the Events and the webhooks never disagree.
type transition struct {
	eventType, reason, action, note string
	key                             webhookdelivery.Event
}

// transitions lists what changed between the status before and after a reconcile that found f,
// at now. Every text carries hints, never keys.
func transitions(before, after *switchboardv1alpha1.APIKey, f *keyFindings, now time.Time) []transition {
	var ts []transition
	now = now.UTC().Truncate(time.Second)
	gen, hint := after.Status.KeyGeneration, after.Status.KeyHint
	keyEvent := func(t webhookdelivery.EventType, reason string) webhookdelivery.Event {
		return webhookdelivery.Event{Type: t, Timestamp: now, Data: webhookdelivery.KeyData{
			Namespace: after.Namespace, Name: after.Name, KeyGeneration: gen, KeyHint: hint, Reason: reason}}
	}
	event := func(eventType, reason, action, note string, args ...any) *transition {
		ts = append(ts, transition{eventType: eventType, reason: reason, action: action, note: fmt.Sprintf(note, args...)})
		return &ts[len(ts)-1]
	}
	only := func(e webhookdelivery.Event) { ts = append(ts, transition{key: e}) }
	previous := func(e webhookdelivery.Event) webhookdelivery.Event {
		if before.Status.KeyGeneration > 0 {
			e.Data.PreviousKeyHint = before.Status.KeyHint
		}
		return e
	}
	issued := !f.restored && gen > before.Status.KeyGeneration
	if f.restored {
		event(corev1.EventTypeWarning, ReasonStatusRestored, "RestoreStatus",
			"the status did not match switchboard's record of key %s (generation %d); it was put back and no key was issued",
			hint, gen)
	} else if issued {
		if gen == 1 {
			t := event(corev1.EventTypeNormal, "KeyCreated", "IssueKey", "issued key %s", hint)
			t.key = keyEvent(webhookdelivery.KeyCreated, t.note)
		} else {
			t := event(corev1.EventTypeNormal, "KeyRotated", "RotateKey", "rotated to key %s (generation %d)", hint, gen)
			if !f.life.renewal {
				t.key = previous(keyEvent(webhookdelivery.KeyRotated, t.note))
			}
		}
		if f.lostHint != "" {
			event(corev1.EventTypeWarning, ReasonDeliverySecretLost, "RedeliverKey",
				"Secret %s no longer held key %s; issued key %s into it, the old one stays valid for %s",
				after.Spec.SecretName, f.lostHint, hint, RedeliveryGrace)
		}
	}
	if f.life.renewal && gen > before.Status.KeyGeneration {
		stays := "which is no longer accepted"
		if !f.renewedUntil.IsZero() {
			stays = "which stays valid until " + f.renewedUntil.UTC().Format(time.RFC3339)
		}
		t := event(corev1.EventTypeNormal, "KeyRenewed", "RenewKey", "renewed key into Secret %s: %s (generation %d) replaces %s, %s",
			after.Spec.SecretName, hint, gen, before.Status.KeyHint, stays)
		t.key = previous(keyEvent(webhookdelivery.KeyRenewed, t.note))
	}
	if f.leak != nil && (f.leakRefused || f.leakRolled || leakToTell(before, after, f.leak, issued)) {
		// One Event in the usual run, which refuses, replaces and rolls; a rollout a later run
		// finished says it again, completed, and the run after one whose status patch was lost
		// says what that one did (their key events have the same id: one delivery).
		t := event(corev1.EventTypeWarning, ReasonKeyLeaked, "RefuseLeakedKey", "%s", f.leak.message(after))
		t.key = leakEvent(before, after, f.leak, t.note)
	}
	const expiringSoon, unusedCond, limitedCond = switchboardv1alpha1.ConditionExpiringSoon, switchboardv1alpha1.ConditionUnused, switchboardv1alpha1.ConditionRenewalLimited
	if was, is := controller.ConditionStatus(before.Status.Conditions, expiringSoon), controller.ConditionStatus(after.Status.Conditions, expiringSoon); was != is && is == metav1.ConditionTrue {
		t := event(corev1.EventTypeWarning, "KeyExpiringSoon", "WarnExpiry", "%s", f.life.expiringMessage)
		t.key = keyEvent(webhookdelivery.KeyExpiring, t.note)
		t.key.Data.ExpiresAt = endOf(after, f)
	}
	if was, is := controller.ConditionStatus(before.Status.Conditions, limitedCond), controller.ConditionStatus(after.Status.Conditions, limitedCond); was != is && is == metav1.ConditionTrue {
		event(corev1.EventTypeWarning, switchboardv1alpha1.ConditionRenewalLimited, "LimitRenewal", "%s", f.life.limited)
	}
	if was, is := controller.ConditionStatus(before.Status.Conditions, unusedCond), controller.ConditionStatus(after.Status.Conditions, unusedCond); was != is && is == metav1.ConditionTrue {
		t := event(corev1.EventTypeWarning, "KeyUnused", "WarnUnused", "key %s has not been used since %s", hintOf(after), f.life.lastActivity.UTC().Format(time.RFC3339))
		t.key = keyEvent(webhookdelivery.KeyUnused, t.note)
		if after.Status.LastUsedAt != nil {
			t.key.Data.LastUsedAt = ptrTo(after.Status.LastUsedAt.UTC())
		}
	}
	const ready, revealed = switchboardv1alpha1.ConditionReady, switchboardv1alpha1.ConditionRevealed
	if was, is := controller.ConditionReason(before.Status.Conditions, ready), controller.ConditionReason(after.Status.Conditions, ready); was != is {
		switch is {
		case switchboardv1alpha1.ReasonRevoked:
			t := event(corev1.EventTypeNormal, "KeyRevoked", "RevokeKey", "revoked key %s", hintOf(after))
			t.key = keyEvent(webhookdelivery.KeyRevoked, "revoked by spec.revoked")
		case switchboardv1alpha1.ReasonUnusedRevoked:
			// Its Event was emitted when the revocation was recorded (revokeUnused).
			only(keyEvent(webhookdelivery.KeyRevoked, "revoked by switchboard: unused for longer than spec.revokeWhenUnusedFor"))
		case switchboardv1alpha1.ReasonExpired:
			end := endOf(after, f)
			at := "its end"
			if end != nil {
				at = end.Format(time.RFC3339)
			}
			t := event(corev1.EventTypeNormal, "KeyExpired", "ExpireKey", "key %s expired at %s", hintOf(after), at)
			t.key = keyEvent(webhookdelivery.KeyExpired, t.note)
			t.key.Data.ExpiresAt = end
		case switchboardv1alpha1.ReasonDeliveryConflict:
			event(corev1.EventTypeWarning, switchboardv1alpha1.ReasonDeliveryConflict, "DeliverKey", "%s", f.conflict)
		}
	}
	was, is := controller.ConditionReason(before.Status.Conditions, revealed), controller.ConditionReason(after.Status.Conditions, revealed)
	switch {
	case was != is && is == switchboardv1alpha1.ReasonRevealClaimed:
		t := event(corev1.EventTypeNormal, "KeyClaimed", "ClaimKey", "key %s was claimed from its reveal Secret", hint)
		t.key = keyEvent(webhookdelivery.KeyRevealed, t.note)
	case was != is && is == switchboardv1alpha1.ReasonRevealExpired:
		event(corev1.EventTypeWarning, switchboardv1alpha1.ReasonRevealExpired, "ExpireReveal",
			"nobody claimed key %s in time; its reveal Secret was deleted. The key stays valid: rotate it to get one you can see", hint)
	case is == switchboardv1alpha1.ReasonDelivered && (was != is || issued):
		// Each generation delivered is a key revealed, to the delivery Secret.
		only(keyEvent(webhookdelivery.KeyRevealed, fmt.Sprintf("key %s was delivered to Secret %s", hint, after.Spec.SecretName)))
	}
	return ts
}

// leakToTell says whether a reconcile tells of the leak l though it did not act on it: what
// Leaked says changed in kind (refused, replacement held, replaced), or it published the
// generation that replaced the leaked key. Both follow from the hash Secret's record, so when a
// reconcile's action landed and its status patch was lost (a conflict, the operator stopping),
// the next one, which publishes what the record holds, still says it; a held replacement was
// reported as a plain rotation.
func leakToTell(before, after *switchboardv1alpha1.APIKey, l *leakFinding, issued bool) bool {
	const leaked = switchboardv1alpha1.ConditionLeaked
	if controller.ConditionReason(before.Status.Conditions, leaked) != controller.ConditionReason(after.Status.Conditions, leaked) {
		return true
	}
	return issued && l.replaced && l.leak.Generation >= before.Status.KeyGeneration
}

// leakEvent is the key event of the leak f: the key that leaked (its generation, and its hint
// as the report or the status before knew it), where it was found and when it was last used.
func leakEvent(before, after *switchboardv1alpha1.APIKey, f *leakFinding, reason string) webhookdelivery.Event {
	d := webhookdelivery.KeyData{Namespace: after.Namespace, Name: after.Name, KeyGeneration: f.leak.Generation, Reason: reason}
	d.KeyHint, _, d.URL = f.said()
	if d.KeyHint == "" && f.leak.Generation == before.Status.KeyGeneration {
		d.KeyHint = before.Status.KeyHint
	}
	if !f.leak.LastUsedAt.IsZero() {
		d.LastUsedAt = ptrTo(f.leak.LastUsedAt.UTC())
	}
	return webhookdelivery.Event{Type: webhookdelivery.KeyLeaked, Timestamp: f.leak.At.UTC(), Data: d}
}

// endOf is when the key ends: its lifetime's end or spec.expiresAt, whichever comes first (nil:
// it does not end).
func endOf(key *switchboardv1alpha1.APIKey, f *keyFindings) *time.Time {
	end := f.life.notAfter
	if key.Spec.ExpiresAt != nil && (end.IsZero() || key.Spec.ExpiresAt.Time.Before(end)) {
		end = key.Spec.ExpiresAt.Time
	}
	if end.IsZero() {
		return nil
	}
	return ptrTo(end.UTC())
}

// keyEvents are the key events of ts, each with its id (keyjournal.EventID of the APIKey, the
// type and the key generation): the same transition computed again is the same event. An event
// of no key generation (none was issued) has no key to speak of and is left out.
func keyEvents(key *switchboardv1alpha1.APIKey, ts []transition) []keyjournal.Event {
	var out []keyjournal.Event
	for _, t := range ts {
		if t.key.Type == "" || t.key.Data.KeyGeneration < 1 {
			continue
		}
		out = append(out, keyjournal.Event{ID: keyjournal.EventID(key.UID, t.key.Type, t.key.Data.KeyGeneration), Event: t.key})
	}
	return out
}

// recordTransitions emits the Events of ts, once the status that reports them is stored.
func (r *Reconciler) recordTransitions(after *switchboardv1alpha1.APIKey, ts []transition) {
	for _, t := range ts {
		if t.reason != "" {
			r.Recorder.Eventf(after, nil, t.eventType, t.reason, t.action, "%s", t.note)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// hintOf names the APIKey's key for people: its hint, or a word when none was issued.
func hintOf(key *switchboardv1alpha1.APIKey) string {
	if key.Status.KeyHint == "" {
		return "(none issued yet)"
	}
	return key.Status.KeyHint
}

// setGraceCondition sets GraceEvidence while an old key's grace may end on evidence, and keeps
// what it last said once that grace is over (until the next rotation); a key that no longer
// asks for it has none.
func setGraceCondition(key *switchboardv1alpha1.APIKey, f *keyFindings) {
	const cond = switchboardv1alpha1.ConditionGraceEvidence
	switch {
	case key.Spec.GraceEndsWhenUnusedFor == nil || f.revoked || f.expired:
		meta.RemoveStatusCondition(&key.Status.Conditions, cond)
	case f.grace.active:
		status := metav1.ConditionFalse
		if f.grace.moved || f.grace.ended {
			status = metav1.ConditionTrue
		}
		controller.SetCondition(&key.Status.Conditions, key.Generation, cond, status, f.grace.reason, f.grace.message)
	}
}
