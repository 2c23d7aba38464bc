// Package readiness is what an APIKey's status says once a reconcile has acted, the last
// concern of its controller: the findings of the reconcile, the fields that mirror the hash
// Secret's record, Ready (computed here alone, from every concern's findings) and the other
// concerns' conditions set from theirs, and the transitions people and other systems are told
// of (Events, and the key events the journal records), from one list.
package readiness

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/binding"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/creditalerts"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/grace"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/issuing"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/leak"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/lifecycle"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/misusealerts"
	"github.com/switchboard-dev/switchboard/internal/controller/keyjournal"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// Findings is what one reconcile of an APIKey found and did, as the status reports it: read by
// FindingsOf from the observation and the outcome of the action. The conditions are then set
// from it, once, in SetConditions, and the Events of the transitions from comparing the status
// before and after (Transitions). A field left at its zero value means "not found out": an
// error stopped the reconcile first, and the condition it decides keeps its value.
type Findings struct {
	// What the observation says (keystate.Observation), with what the action found in its
	// place: the revocation (spec.revoked, or the operator's own, at RevokedAt), the expiry,
	// a delivery conflict, the hash Secret, the reveal, the key's life, the old key's grace.
	Revoked   bool
	RevokedAt time.Time
	Expired   bool
	Conflict  string
	Hash      keystate.HashState
	Reveal    string
	Life      keystate.Life
	Grace     keystate.GraceEvidence
	// What the action did (keystate.Outcome): the generation an issue started for, whether it
	// published it, the hint a lost delivery Secret held, a status put back, and for a renewal
	// when the key it replaced stops being accepted (zero: it already is not).
	Issuing      int64
	Issued       bool
	LostHint     string
	Restored     bool
	RenewedUntil time.Time
	// Leak is the last leak the hash Secret records (nil: none, or the hash Secret not seen),
	// LeakRefused says this reconcile recorded it, LeakRolled that it rolled the workloads
	// reading its delivery Secret (or found it may not).
	Leak        *leak.Finding
	LeakRefused bool
	LeakRolled  bool
	// Binding is spec.binding resolved (the observation's); BindingRecorded says the action
	// wrote its record.
	Binding         keystate.BindingFinding
	BindingRecorded bool
	// BindingMode is the mode of the key's binding the misuse events report (misusealerts.ModeOf).
	BindingMode switchboardv1alpha1.BindingMode
}

// FindingsOf is what the status reports of an APIKey observed as obs after decision d was
// carried out with outcome out: what the action found replaces what was observed. life is the
// key's life, read again when the action wrote its record (an issue, a publication, a recorded
// lifetime).
func FindingsOf(obs *keystate.Observation, d keystate.Decision, out keystate.Outcome, life keystate.Life) Findings {
	f := Findings{
		Revoked: obs.Revoked || !out.RevokedAt.IsZero(), RevokedAt: obs.RevokedAt, Expired: obs.Expired,
		Issuing: out.Issuing, Issued: out.Issued, LostHint: out.LostHint, Restored: out.Restored,
		Conflict: obs.Conflict, Hash: obs.Hash, Reveal: obs.Reveal, Life: life, Grace: obs.Grace,
		Binding: obs.Binding, BindingRecorded: out.BindingRecorded,
	}
	if !out.RevokedAt.IsZero() {
		f.RevokedAt = out.RevokedAt
	}
	if out.Published || out.Issuing > 0 {
		// The action wrote the key (or tried): what it found replaces what was observed.
		f.Conflict, f.Hash = out.Conflict, keystate.HashUnknown
	}
	if out.HashFound {
		f.Hash = keystate.HashFound
	}
	if out.Reveal != "" {
		f.Reveal = out.Reveal
	}
	if i, ok := d.Do.(issuing.Issue); ok && i.Renewal {
		f.Life.Renewal = true
		f.RenewedUntil = life.NotAfter // the life of the key it replaced (the host's Reconcile)
	}
	if out.Renewed {
		f.Life.Renewal = true
		f.RenewedUntil = out.RenewedUntil
	}
	return f
}

// SetConditions sets Ready from what the reconcile found, and each concern's conditions from
// its findings: the key's life, its leak, its old key's grace, its reveal. It is the only place
// that sets Ready.
func SetConditions(key *switchboardv1alpha1.APIKey, f *Findings, systemNamespace string) {
	set := func(status metav1.ConditionStatus, reason, message string) {
		objstatus.SetCondition(&key.Status.Conditions, key.Generation, switchboardv1alpha1.ConditionReady, status, reason, message)
	}
	switch {
	case f.Revoked && !f.RevokedAt.IsZero() && !key.Spec.Revoked:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonUnusedRevoked,
			fmt.Sprintf("key %s was revoked at %s: unused for longer than spec.revokeWhenUnusedFor (recorded in hash Secret %s/%s). It is refused for good and a rotation issues no new key; create a new APIKey for one",
				keystate.HintOf(key), f.RevokedAt.UTC().Format(time.RFC3339), systemNamespace, keysecret.HashName(key.UID)))
	case f.Revoked:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked,
			"the key is revoked (spec.revoked) and refused; create a new APIKey for a new key")
	case f.Expired:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired,
			fmt.Sprintf("the key expired at %s (spec.expiresAt)", key.Spec.ExpiresAt.UTC().Format(time.RFC3339)))
	case f.Leak != nil && !f.Leak.Replaced:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonLeaked, f.Leak.ReadyMessage(key))
	case f.Conflict != "":
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict, f.Conflict)
	case f.Life.Ended && !f.Issued && f.Life.Limited != "":
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired,
			fmt.Sprintf("key %s reached the end of its lifetime at %s (spec.lifetime) and is refused until its renewal at %s, held back by the platform's minimum interval between renewals (RenewalLimited)",
				key.Status.KeyHint, f.Life.NotAfter.UTC().Format(time.RFC3339), f.Life.RenewAt.UTC().Format(time.RFC3339)))
	case f.Life.Ended && !f.Issued:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired,
			fmt.Sprintf("key %s reached the end of its lifetime at %s (spec.lifetime) and is refused; rotate it for a new key", key.Status.KeyHint, f.Life.NotAfter.UTC().Format(time.RFC3339)))
	case f.Issued || f.Hash == keystate.HashFound:
		set(metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued,
			fmt.Sprintf("key %s (generation %d) is valid", key.Status.KeyHint, key.Status.KeyGeneration))
	case f.Hash == keystate.HashMissing:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonHashMissing,
			fmt.Sprintf("the hash Secret %s/%s of key %s is missing, so the key is refused; rotate the key to issue a new one",
				systemNamespace, keysecret.HashName(key.UID), key.Status.KeyHint))
	case f.Issuing > 0 && key.Status.KeyGeneration == 0:
		// A rotation under way leaves Ready alone: the current key works until it is replaced.
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonIssuing, fmt.Sprintf("issuing key generation %d", f.Issuing))
	}
	ended := f.Revoked || f.Expired
	lifecycle.SetConditions(key, ended, &f.Life, f.Issued && f.Issuing > 1)
	leak.SetCondition(key, f.Leak)
	grace.SetCondition(key, ended, &f.Grace)
	binding.SetCondition(key, &f.Binding, f.BindingRecorded)
	issuing.SetRevealedCondition(key, f.Reveal)
}

// Mirror sets the status fields that only show what the spec and the hash Secret's record say,
// whatever the action: the expiry, the key's life, the revocation, and for an issued key whose
// status the action did not write, the previous key's grace and the unclaimed reveal (f says
// what the reconcile found of them). A field someone else changed is put back; restored says so.
func Mirror(ctx context.Context, s *keystate.State, d keystate.Decision, f *Findings, p keystate.Params) (restored bool) {
	key := s.Key
	key.Status.ExpiresAt = key.Spec.ExpiresAt.DeepCopy()
	rec := s.Record()
	lifecycle.Mirror(key, rec, p.MinRenewal)
	switch {
	case key.Spec.Revoked:
		if key.Status.RevokedAt == nil {
			key.Status.RevokedAt = keystate.TimePtr(s.Now)
		}
		return false
	case rec != nil && rec.Revoked():
		// The operator's own revocation: the status shows the instant its record holds.
		key.Status.RevokedAt = keystate.TimePtr(rec.RevokedAt)
		return false
	case key.Status.RevokedAt != nil:
		// Written by someone else (the API server refuses it on a key not revoked since issue
		// 18, so it is older than that): the key is not revoked, and the status says so again.
		log.FromContext(ctx).Info("status.revokedAt is set but the key is not revoked; restoring the status")
		key.Status.RevokedAt = nil
		restored = true
	}
	if _, own := d.Do.(keystate.KeyPublisher); own {
		return restored
	}
	if f.Hash == keystate.HashFound {
		key.Status.PreviousKeyValidUntil = keystate.PreviousValidUntil(s.Hash)
	}
	switch f.Reveal {
	case switchboardv1alpha1.ReasonRevealClaimed, switchboardv1alpha1.ReasonRevealExpired:
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		return restored
	}
	if key.Status.RevealSecretName == "" {
		return restored
	}
	if want := keysecret.RevealName(key.Name, key.Status.KeyGeneration); key.Status.RevealSecretName != want {
		// The operator publishes no other name: someone else wrote this one into the status.
		log.FromContext(ctx).Info("status.revealSecretName names a Secret switchboard did not publish; restoring it",
			"found", key.Status.RevealSecretName, "want", want)
		key.Status.RevealSecretName = want
	}
	key.Status.RevealExpiresAt = keystate.TimePtr(issuing.RevealDeadline(key, s.Record(), s.Now, p.RevealTTL))
	return restored
}

// ReasonStatusRestored is the Event reason of a status that did not say what the hash Secret
// records (keyGeneration, keyHint, lastHandledRotationAt) and was put back.
const ReasonStatusRestored = "StatusRestored"

// Transition is one thing a reconcile changed that people and other systems are told of: a
// Kubernetes Event (reason "" when none), a key event (key.Type "" when none), or both. One
// list (Transitions) feeds both, so the Events and the webhooks never disagree.
type Transition struct {
	eventType, reason, action, note string
	key                             webhookdelivery.Event
}

// Transitions lists what changed between the status before and after a reconcile that found f,
// at now. Every text carries hints, never keys.
func Transitions(before, after *switchboardv1alpha1.APIKey, f *Findings, now time.Time) []Transition {
	var ts []Transition
	now = now.UTC().Truncate(time.Second)
	gen, hint := after.Status.KeyGeneration, after.Status.KeyHint
	keyEvent := func(t webhookdelivery.EventType, reason string) webhookdelivery.Event {
		return webhookdelivery.Event{Type: t, Timestamp: now, Data: webhookdelivery.KeyData{
			Namespace: after.Namespace, Name: after.Name, KeyGeneration: gen, KeyHint: hint, Reason: reason}}
	}
	event := func(eventType, reason, action, note string, args ...any) *Transition {
		ts = append(ts, Transition{eventType: eventType, reason: reason, action: action, note: fmt.Sprintf(note, args...)})
		return &ts[len(ts)-1]
	}
	only := func(e webhookdelivery.Event) { ts = append(ts, Transition{key: e}) }
	previous := func(e webhookdelivery.Event) webhookdelivery.Event {
		if before.Status.KeyGeneration > 0 {
			e.Data.PreviousKeyHint = before.Status.KeyHint
		}
		return e
	}
	issued := !f.Restored && gen > before.Status.KeyGeneration
	if f.Restored {
		event(corev1.EventTypeWarning, ReasonStatusRestored, "RestoreStatus",
			"the status did not match switchboard's record of key %s (generation %d); it was put back and no key was issued",
			hint, gen)
	} else if issued {
		if gen == 1 {
			t := event(corev1.EventTypeNormal, "KeyCreated", "IssueKey", "issued key %s", hint)
			t.key = keyEvent(webhookdelivery.KeyCreated, t.note)
		} else {
			t := event(corev1.EventTypeNormal, "KeyRotated", "RotateKey", "rotated to key %s (generation %d)", hint, gen)
			if !f.Life.Renewal {
				t.key = previous(keyEvent(webhookdelivery.KeyRotated, t.note))
			}
		}
		if f.LostHint != "" {
			event(corev1.EventTypeWarning, issuing.ReasonDeliverySecretLost, "RedeliverKey",
				"Secret %s no longer held key %s; issued key %s into it, the old one stays valid for %s",
				after.Spec.SecretName, f.LostHint, hint, issuing.RedeliveryGrace)
		}
	}
	if f.Life.Renewal && gen > before.Status.KeyGeneration {
		stays := "which is no longer accepted"
		if !f.RenewedUntil.IsZero() {
			stays = "which stays valid until " + f.RenewedUntil.UTC().Format(time.RFC3339)
		}
		t := event(corev1.EventTypeNormal, "KeyRenewed", "RenewKey", "renewed key into Secret %s: %s (generation %d) replaces %s, %s",
			after.Spec.SecretName, hint, gen, before.Status.KeyHint, stays)
		t.key = previous(keyEvent(webhookdelivery.KeyRenewed, t.note))
	}
	if f.Leak != nil && (f.LeakRefused || f.LeakRolled || leak.ToTell(before, after, f.Leak, issued)) {
		// One Event in the usual run, which refuses, replaces and rolls; a rollout a later run
		// finished says it again, completed, and the run after one whose status patch was lost
		// says what that one did (their key events have the same id: one delivery).
		t := event(corev1.EventTypeWarning, leak.ReasonKeyLeaked, "RefuseLeakedKey", "%s", f.Leak.Message(after))
		t.key = leak.Event(before, after, f.Leak, t.note)
	}
	const expiringSoon, unusedCond, limitedCond = switchboardv1alpha1.ConditionExpiringSoon, switchboardv1alpha1.ConditionUnused, switchboardv1alpha1.ConditionRenewalLimited
	if was, is := objstatus.ConditionStatus(before.Status.Conditions, expiringSoon), objstatus.ConditionStatus(after.Status.Conditions, expiringSoon); was != is && is == metav1.ConditionTrue {
		t := event(corev1.EventTypeWarning, "KeyExpiringSoon", "WarnExpiry", "%s", f.Life.ExpiringMessage)
		t.key = keyEvent(webhookdelivery.KeyExpiring, t.note)
		t.key.Data.ExpiresAt = endOf(after, f)
	}
	if was, is := objstatus.ConditionStatus(before.Status.Conditions, limitedCond), objstatus.ConditionStatus(after.Status.Conditions, limitedCond); was != is && is == metav1.ConditionTrue {
		event(corev1.EventTypeWarning, switchboardv1alpha1.ConditionRenewalLimited, "LimitRenewal", "%s", f.Life.Limited)
	}
	if was, is := objstatus.ConditionStatus(before.Status.Conditions, unusedCond), objstatus.ConditionStatus(after.Status.Conditions, unusedCond); was != is && is == metav1.ConditionTrue {
		t := event(corev1.EventTypeWarning, "KeyUnused", "WarnUnused", "key %s has not been used since %s", keystate.HintOf(after), f.Life.LastActivity.UTC().Format(time.RFC3339))
		t.key = keyEvent(webhookdelivery.KeyUnused, t.note)
		if after.Status.LastUsedAt != nil {
			t.key.Data.LastUsedAt = ptr.To(after.Status.LastUsedAt.UTC())
		}
	}
	for _, a := range creditalerts.Alerts(before.Status.CreditAlerts, after.Status.CreditAlerts, after.Status.Credits, hint) {
		eventType, action := corev1.EventTypeNormal, "RefillCredits"
		if a.Warning {
			eventType, action = corev1.EventTypeWarning, "WarnCredits"
		}
		t := event(eventType, a.Reason, action, "%s", a.Message)
		t.key = keyEvent(a.Type, t.note)
		t.key.Timestamp, t.key.Data.Credits = a.At, &a.Data
		if after.Status.LastUsedAt != nil {
			t.key.Data.LastUsedAt = ptr.To(after.Status.LastUsedAt.UTC())
		}
	}
	const workloadBinding = switchboardv1alpha1.ConditionWorkloadBinding
	if was, is := objstatus.ConditionReason(before.Status.Conditions, workloadBinding), objstatus.ConditionReason(after.Status.Conditions, workloadBinding); was != is &&
		objstatus.ConditionStatus(after.Status.Conditions, workloadBinding) == metav1.ConditionFalse && is != switchboardv1alpha1.ReasonBindingPending {
		// What the binding cannot record (consumers unreadable, too many): told once, as it starts.
		event(corev1.EventTypeWarning, "Binding"+is, "BindKey", "%s", f.Binding.Message)
	}
	for _, a := range misusealerts.Alerts(before.Status.MisuseAlerts, after.Status.MisuseAlerts, after.Status.Binding, f.BindingMode, hint) {
		t := event(corev1.EventTypeWarning, misusealerts.ReasonKeyMisused, "ReportMisuse", "%s", a.Message)
		t.key = keyEvent(webhookdelivery.KeyMisused, t.note)
		t.key.Timestamp, t.key.Data.Misuse = a.At, &a.Data
		if after.Status.LastUsedAt != nil {
			t.key.Data.LastUsedAt = ptr.To(after.Status.LastUsedAt.UTC())
		}
	}
	const ready, revealed = switchboardv1alpha1.ConditionReady, switchboardv1alpha1.ConditionRevealed
	if was, is := objstatus.ConditionReason(before.Status.Conditions, ready), objstatus.ConditionReason(after.Status.Conditions, ready); was != is {
		switch is {
		case switchboardv1alpha1.ReasonRevoked:
			t := event(corev1.EventTypeNormal, "KeyRevoked", "RevokeKey", "revoked key %s", keystate.HintOf(after))
			t.key = keyEvent(webhookdelivery.KeyRevoked, "revoked by spec.revoked")
		case switchboardv1alpha1.ReasonUnusedRevoked:
			// Its Event was emitted when the revocation was recorded (lifecycle).
			only(keyEvent(webhookdelivery.KeyRevoked, "revoked by switchboard: unused for longer than spec.revokeWhenUnusedFor"))
		case switchboardv1alpha1.ReasonExpired:
			end := endOf(after, f)
			at := "its end"
			if end != nil {
				at = end.Format(time.RFC3339)
			}
			t := event(corev1.EventTypeNormal, "KeyExpired", "ExpireKey", "key %s expired at %s", keystate.HintOf(after), at)
			t.key = keyEvent(webhookdelivery.KeyExpired, t.note)
			t.key.Data.ExpiresAt = end
		case switchboardv1alpha1.ReasonDeliveryConflict:
			event(corev1.EventTypeWarning, switchboardv1alpha1.ReasonDeliveryConflict, "DeliverKey", "%s", f.Conflict)
		}
	}
	was, is := objstatus.ConditionReason(before.Status.Conditions, revealed), objstatus.ConditionReason(after.Status.Conditions, revealed)
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

// endOf is when the key ends: its lifetime's end or spec.expiresAt, whichever comes first (nil:
// it does not end).
func endOf(key *switchboardv1alpha1.APIKey, f *Findings) *time.Time {
	end := lifecycle.EndOf(key, f.Life.NotAfter)
	if end.IsZero() {
		return nil
	}
	return ptr.To(end.UTC())
}

// KeyEvents are the key events of ts, each with its id (keyjournal.EventID of the APIKey, the
// type and the key generation; for a credit event keyjournal.PeriodEventID, of its period and
// threshold; for a misuse event keyjournal.MisuseEventID, of the last misuse it reports): the same transition computed again is the same event. An event
// of no key generation (none was issued) has no key to speak of and is left out.
func KeyEvents(key *switchboardv1alpha1.APIKey, ts []Transition) []keyjournal.Event {
	var out []keyjournal.Event
	for _, t := range ts {
		if t.key.Type == "" || t.key.Data.KeyGeneration < 1 {
			continue
		}
		id := keyjournal.EventID(key.UID, t.key.Type, t.key.Data.KeyGeneration)
		if c := t.key.Data.Credits; c != nil {
			id = keyjournal.PeriodEventID(key.UID, t.key.Type, c.Period, c.ThresholdPercent)
		}
		if m := t.key.Data.Misuse; m != nil {
			id = keyjournal.MisuseEventID(key.UID, m.LastMisuseAt)
		}
		out = append(out, keyjournal.Event{ID: id, Event: t.key})
	}
	return out
}

// Emit emits the Events of ts with recorder, once the status that reports them is stored.
func Emit(recorder events.EventRecorder, after *switchboardv1alpha1.APIKey, ts []Transition) {
	for _, t := range ts {
		if t.reason != "" {
			recorder.Eventf(after, nil, t.eventType, t.reason, t.action, "%s", t.note)
		}
	}
}
