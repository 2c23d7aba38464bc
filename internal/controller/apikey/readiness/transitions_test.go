package readiness

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/leak"
	"github.com/switchboard-dev/switchboard/internal/controller/keyjournal"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// The transitions' table: what a reconcile tells people (Events) and other systems (key
// events) of each change of the status, from one list.

var transitionsNow = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// hints of generations 1 to 3, shaped as real ones (webhookdelivery checks the shape).
var genHint = map[int64]string{1: "sb_live_AAAA…aaaa", 2: "sb_live_BBBB…bbbb", 3: "sb_live_CCCC…cccc"}

// transitionKey is an APIKey at generation gen with the conditions conds (type=status/reason).
func transitionKey(gen int64, conds ...metav1.Condition) *switchboardv1alpha1.APIKey {
	k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "ci", UID: types.UID("uid-1"), Generation: 1}}
	k.Spec.SecretName = "ci-key"
	k.Status.KeyGeneration, k.Status.KeyHint = gen, genHint[gen]
	for _, c := range conds {
		objstatus.SetCondition(&k.Status.Conditions, 1, c.Type, c.Status, c.Reason, "")
	}
	return k
}

func cond(condType string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: condType, Status: status, Reason: reason}
}

var (
	readyIssued   = cond(switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)
	pending       = cond(switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealPending)
	claimed       = cond(switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonRevealClaimed)
	deliveredCond = cond(switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonDelivered)
	notExpiring   = cond(switchboardv1alpha1.ConditionExpiringSoon, metav1.ConditionFalse, switchboardv1alpha1.ReasonNotEndingSoon)
	expiringSoon  = cond(switchboardv1alpha1.ConditionExpiringSoon, metav1.ConditionTrue, "EndsSoon")
	used          = cond(switchboardv1alpha1.ConditionUnused, metav1.ConditionFalse, switchboardv1alpha1.ReasonUsed)
	unused        = cond(switchboardv1alpha1.ConditionUnused, metav1.ConditionTrue, switchboardv1alpha1.ReasonUnused)
	leakReplaced  = cond(switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakReplaced)
	leakedHeld    = cond(switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakReplacementHeld)
)

// keyEventOf is what the table expects of one key event: its type and key generation.
type keyEventOf struct {
	Type webhookdelivery.EventType
	Gen  int64
}

func TestTransitions(t *testing.T) {
	end := transitionsNow.Add(48 * time.Hour)
	lastUsed := transitionsNow.Add(-time.Hour)
	leakReport := &switchboardv1alpha1.LeakReport{Spec: switchboardv1alpha1.LeakReportSpec{
		KeyHint: genHint[1], Source: switchboardv1alpha1.LeakSourceGitHubPartner, URL: "https://github.com/acme/app/blob/main/.env"}}
	cases := []struct {
		name          string
		before, after *switchboardv1alpha1.APIKey
		f             Findings
		wantEvents    []string // Kubernetes Event reasons
		wantKey       []keyEventOf
	}{
		{name: "nothing changed", before: transitionKey(1, readyIssued, claimed), after: transitionKey(1, readyIssued, claimed)},
		{name: "first key, to reveal", before: transitionKey(0), after: transitionKey(1, readyIssued, pending),
			wantEvents: []string{"KeyCreated"}, wantKey: []keyEventOf{{webhookdelivery.KeyCreated, 1}}},
		{name: "first key, delivered", before: transitionKey(0), after: transitionKey(1, readyIssued, deliveredCond),
			wantEvents: []string{"KeyCreated"}, wantKey: []keyEventOf{{webhookdelivery.KeyCreated, 1}, {webhookdelivery.KeyRevealed, 1}}},
		{name: "claimed", before: transitionKey(1, readyIssued, pending), after: transitionKey(1, readyIssued, claimed),
			wantEvents: []string{"KeyClaimed"}, wantKey: []keyEventOf{{webhookdelivery.KeyRevealed, 1}}},
		{name: "rotated, to reveal", before: transitionKey(1, readyIssued, claimed), after: transitionKey(2, readyIssued, pending),
			wantEvents: []string{"KeyRotated"}, wantKey: []keyEventOf{{webhookdelivery.KeyRotated, 2}}},
		{name: "rotated, delivered: each generation delivered is revealed", before: transitionKey(1, readyIssued, deliveredCond), after: transitionKey(2, readyIssued, deliveredCond),
			wantEvents: []string{"KeyRotated"}, wantKey: []keyEventOf{{webhookdelivery.KeyRotated, 2}, {webhookdelivery.KeyRevealed, 2}}},
		{name: "renewed: a renewal, not a rotation", before: transitionKey(1, readyIssued, deliveredCond), after: transitionKey(2, readyIssued, deliveredCond),
			f:          Findings{Life: keystate.Life{Renewal: true, NotAfter: end}, RenewedUntil: end},
			wantEvents: []string{"KeyRotated", "KeyRenewed"}, wantKey: []keyEventOf{{webhookdelivery.KeyRenewed, 2}, {webhookdelivery.KeyRevealed, 2}}},
		{name: "status restored: nothing was issued", before: transitionKey(1, readyIssued, claimed), after: transitionKey(2, readyIssued, claimed), f: Findings{Restored: true},
			wantEvents: []string{ReasonStatusRestored}},
		{name: "expiring soon", before: transitionKey(1, readyIssued, claimed, notExpiring), after: transitionKey(1, readyIssued, claimed, expiringSoon),
			f:          Findings{Life: keystate.Life{NotAfter: end, ExpiringMessage: "ends in two days"}},
			wantEvents: []string{"KeyExpiringSoon"}, wantKey: []keyEventOf{{webhookdelivery.KeyExpiring, 1}}},
		{name: "still expiring soon: told once", before: transitionKey(1, readyIssued, claimed, expiringSoon), after: transitionKey(1, readyIssued, claimed, expiringSoon),
			f: Findings{Life: keystate.Life{NotAfter: end}}},
		{name: "unused", before: transitionKey(1, readyIssued, claimed, used), after: transitionKey(1, readyIssued, claimed, unused),
			wantEvents: []string{"KeyUnused"}, wantKey: []keyEventOf{{webhookdelivery.KeyUnused, 1}}},
		{name: "revoked", before: transitionKey(1, readyIssued, claimed),
			after:      transitionKey(1, cond(switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked), claimed),
			wantEvents: []string{"KeyRevoked"}, wantKey: []keyEventOf{{webhookdelivery.KeyRevoked, 1}}},
		{name: "revoked for want of use: its Event was emitted with the record", before: transitionKey(1, readyIssued, claimed),
			after:   transitionKey(1, cond(switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonUnusedRevoked), claimed),
			wantKey: []keyEventOf{{webhookdelivery.KeyRevoked, 1}}},
		{name: "revoked before any key: no key to speak of", before: transitionKey(0),
			after:      transitionKey(0, cond(switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked)),
			wantEvents: []string{"KeyRevoked"}},
		{name: "expired", before: transitionKey(1, readyIssued, claimed),
			after:      transitionKey(1, cond(switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired), claimed),
			f:          Findings{Life: keystate.Life{NotAfter: transitionsNow}},
			wantEvents: []string{"KeyExpired"}, wantKey: []keyEventOf{{webhookdelivery.KeyExpired, 1}}},
		{name: "leaked and replaced", before: transitionKey(1, readyIssued, deliveredCond), after: transitionKey(2, readyIssued, deliveredCond),
			f: Findings{LeakRefused: true, Leak: &leak.Finding{Report: leakReport, Replaced: true,
				Leak: keysecret.Leak{Generation: 1, At: transitionsNow, LastUsedAt: lastUsed}}},
			wantEvents: []string{"KeyRotated", leak.ReasonKeyLeaked},
			wantKey:    []keyEventOf{{webhookdelivery.KeyRotated, 2}, {webhookdelivery.KeyLeaked, 1}, {webhookdelivery.KeyRevealed, 2}}},
		{name: "a leak recorded earlier is not told again", before: transitionKey(2, readyIssued, deliveredCond), after: transitionKey(2, readyIssued, deliveredCond),
			f: Findings{Leak: &leak.Finding{Report: leakReport, Replaced: true, Leak: keysecret.Leak{Generation: 1, At: transitionsNow}}}},
		{name: "a leak recorded earlier is not told again, nor with a later rotation",
			before: transitionKey(2, readyIssued, deliveredCond, leakReplaced), after: transitionKey(3, readyIssued, deliveredCond, leakReplaced),
			f:          Findings{Leak: &leak.Finding{Report: leakReport, Replaced: true, Leak: keysecret.Leak{Generation: 1, At: transitionsNow}}},
			wantEvents: []string{"KeyRotated"}, wantKey: []keyEventOf{{webhookdelivery.KeyRotated, 3}, {webhookdelivery.KeyRevealed, 3}}},
		// A reconcile whose status patch was lost after its action landed: the next one, which
		// did not act on the leak, tells of it from the record.
		{name: "a held replacement published by the next reconcile: told, not only a rotation",
			before: transitionKey(2, leakedHeld, deliveredCond), after: transitionKey(3, readyIssued, deliveredCond, leakReplaced),
			f:          Findings{Issued: true, Leak: &leak.Finding{Report: leakReport, Replaced: true, Leak: keysecret.Leak{Generation: 2, At: transitionsNow}}},
			wantEvents: []string{"KeyRotated", leak.ReasonKeyLeaked},
			wantKey:    []keyEventOf{{webhookdelivery.KeyRotated, 3}, {webhookdelivery.KeyLeaked, 2}, {webhookdelivery.KeyRevealed, 3}}},
		{name: "a second leak's replacement published by the next reconcile: Leaked was Replaced already",
			before: transitionKey(2, readyIssued, deliveredCond, leakReplaced), after: transitionKey(3, readyIssued, deliveredCond, leakReplaced),
			f:          Findings{Issued: true, Leak: &leak.Finding{Report: leakReport, Replaced: true, Leak: keysecret.Leak{Generation: 2, At: transitionsNow}}},
			wantEvents: []string{"KeyRotated", leak.ReasonKeyLeaked},
			wantKey:    []keyEventOf{{webhookdelivery.KeyRotated, 3}, {webhookdelivery.KeyLeaked, 2}, {webhookdelivery.KeyRevealed, 3}}},
		{name: "a leak held by a reconcile whose status was lost: Leaked turns ReplacementHeld",
			before: transitionKey(2, readyIssued, deliveredCond, leakReplaced), after: transitionKey(2, leakedHeld, deliveredCond),
			f:          Findings{Leak: &leak.Finding{Report: leakReport, HeldUntil: transitionsNow.Add(time.Minute), Leak: keysecret.Leak{Generation: 2, At: transitionsNow}}},
			wantEvents: []string{leak.ReasonKeyLeaked}, wantKey: []keyEventOf{{webhookdelivery.KeyLeaked, 2}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := Transitions(tc.before, tc.after, &tc.f, transitionsNow)
			var reasons []string
			for _, tr := range ts {
				if tr.reason != "" {
					reasons = append(reasons, tr.reason)
				}
			}
			if !reflect.DeepEqual(reasons, tc.wantEvents) {
				t.Errorf("Events %v, want %v", reasons, tc.wantEvents)
			}
			events := KeyEvents(tc.after, ts)
			var got []keyEventOf
			for _, e := range events {
				got = append(got, keyEventOf{e.Type, e.Data.KeyGeneration})
				if want := keyjournal.EventID(tc.after.UID, e.Type, e.Data.KeyGeneration); e.ID != want {
					t.Errorf("%s: id %s, want %s (from UID, type and generation)", e.Type, e.ID, want)
				}
				// Every event this table makes is one a receiver can get: its schema's rules hold.
				if _, err := webhookdelivery.NewMessage(keyjournal.MessageID("hook", e.ID), e.Event); err != nil {
					t.Errorf("%s: %v", e.Type, err)
				}
			}
			if !reflect.DeepEqual(got, tc.wantKey) {
				t.Errorf("key events %v, want %v", got, tc.wantKey)
			}
			// Computed again (after a crash), the same events.
			if again := KeyEvents(tc.after, Transitions(tc.before, tc.after, &tc.f, transitionsNow.Add(time.Minute))); !sameIDs(again, events) {
				t.Errorf("computed again: %v, then %v", again, events)
			}
		})
	}
}

// TestTransitionsData: what the key events say: the hints (the previous key's for a rotation,
// the leaked key's for a leak), where a leak was found, when a key ends, never anything else.
func TestTransitionsData(t *testing.T) {
	end := transitionsNow.Add(48 * time.Hour)
	lastUsed := transitionsNow.Add(-time.Hour)
	f := Findings{LeakRefused: true, Leak: &leak.Finding{Replaced: true, Leak: keysecret.Leak{Generation: 1, At: transitionsNow, LastUsedAt: lastUsed},
		Report: &switchboardv1alpha1.LeakReport{Spec: switchboardv1alpha1.LeakReportSpec{Source: "GitHubPartner", URL: "https://github.com/acme/app"}}}}
	events := KeyEvents(transitionKey(2), Transitions(transitionKey(1, readyIssued, deliveredCond), transitionKey(2, readyIssued, deliveredCond), &f, transitionsNow))
	byType := map[webhookdelivery.EventType]webhookdelivery.KeyData{}
	for _, e := range events {
		byType[e.Type] = e.Data
	}
	if d := byType[webhookdelivery.KeyRotated]; d.KeyHint != genHint[2] || d.PreviousKeyHint != genHint[1] {
		t.Errorf("rotated: hint %q, previous %q; want %q, %q", d.KeyHint, d.PreviousKeyHint, genHint[2], genHint[1])
	}
	// The report gave no hint: the status before the replacement names the leaked key.
	if d := byType[webhookdelivery.KeyLeaked]; d.KeyHint != genHint[1] || d.URL != "https://github.com/acme/app" || d.LastUsedAt == nil || !d.LastUsedAt.Equal(lastUsed) {
		t.Errorf("leaked: %+v", d)
	}

	expiring := Findings{Life: keystate.Life{NotAfter: end, ExpiringMessage: "ends soon"}}
	events = KeyEvents(transitionKey(1), Transitions(transitionKey(1, notExpiring), transitionKey(1, expiringSoon), &expiring, transitionsNow))
	if len(events) != 1 || events[0].Data.ExpiresAt == nil || !events[0].Data.ExpiresAt.Equal(end) || events[0].Data.Reason != "ends soon" {
		t.Errorf("expiring: %+v", events)
	}
}

func sameIDs(a, b []keyjournal.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID {
			return false
		}
	}
	return true
}
