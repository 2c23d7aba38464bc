package apikey

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The plan's table: every transition of the APIKey reconciler, decided in microseconds from
// a keyState built by hand. The envtest suites check that the steps do what they say.

var planNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

const planTTL = time.Hour

// planKeyObj is an APIKey with the finalizer whose status says generation gen was issued
// (hint "h<gen>", rotation "r<gen-1>" handled, reveal pending when reveal).
func planKeyObj(gen int64, reveal bool) *switchboardv1alpha1.APIKey {
	k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "ci", UID: types.UID("uid-1"),
		Finalizers: []string{switchboardv1alpha1.FinalizerAPIKey}, Generation: 3}}
	if gen > 0 {
		k.Status.KeyGeneration, k.Status.KeyHint = gen, hintOfGen(gen)
		if gen > 1 {
			k.Status.LastHandledRotationAt = rotationOfGen(gen)
			k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: rotationOfGen(gen), GracePeriod: metav1.Duration{Duration: time.Hour}}
		}
		if reveal {
			// As the status mirrors the recorded deadline (planHash).
			deadline := metav1.NewTime(planNow.Add(30 * time.Minute))
			k.Status.RevealSecretName, k.Status.RevealExpiresAt = keysecret.RevealName("ci", gen), &deadline
		}
	}
	return k
}

func hintOfGen(gen int64) string     { return "h" + string(rune('0'+gen)) }
func rotationOfGen(gen int64) string { return "r" + string(rune('0'+gen-1)) }

// planHash is key's hash Secret for generation gen, recording the status's issue with a reveal
// deadline (reveal) or a delivery to spec.secretName.
func planHash(key *switchboardv1alpha1.APIKey, gen int64, reveal bool) *corev1.Secret {
	h := keysecret.NewHash(key, "system", gen, apikey.Sum(hintOfGen(gen)))
	rec := keysecret.Issued{Hint: hintOfGen(gen)}
	if gen > 1 {
		rec.RotationHandled = rotationOfGen(gen)
	}
	if reveal {
		rec.RevealExpiresAt = planNow.Add(30 * time.Minute)
	} else {
		rec.Delivery = key.Spec.SecretName
	}
	keysecret.SetIssued(h, rec)
	return h
}

// planned is what plan decided, in the terms the tables write: the action (by its type's name,
// "none" for none), its generation, grace and lost hint, the facts, the wake-up and the policy.
type planned struct {
	do       string
	gen      int64
	grace    time.Duration
	lostHint string
	found    keyFindings
	after    time.Duration
	problem  string
	policy   string
}

// planOf runs plan on s and says what it decided.
func planOf(s *keyState, p planParams) planned {
	obs, d := plan(s, p)
	got := planned{do: "none", gen: d.gen, after: obs.wake.after, problem: d.problem, policy: d.policy}
	if d.do != nil {
		got.do = reflect.TypeOf(d.do).Name()
	}
	if i, ok := d.do.(issue); ok {
		got.grace, got.lostHint = i.grace, i.lostHint
	}
	got.found = findingsOf(obs, d, outcome{}, obs.life)
	return got
}

// matches says got is want: the same action, generation, grace and lost hint, revoked and
// expired alike, the facts want names (conflict, hash, reveal), and its wake-up if it names one.
func (got planned) matches(want planned) bool {
	if want.do == "" {
		want.do = "none"
	}
	f, w := got.found, want.found
	return got.do == want.do && got.gen == want.gen && got.grace == want.grace && got.lostHint == want.lostHint &&
		got.problem == want.problem && f.revoked == w.revoked && f.revokedAt.Equal(w.revokedAt) && f.expired == w.expired &&
		(w.conflict == "" || f.conflict == w.conflict) && (w.hash == hashUnknown || f.hash == w.hash) &&
		(w.reveal == "" || f.reveal == w.reveal) && (want.after == 0 || got.after == want.after)
}

// TestPlan: the chain as a whole, on the transitions of the APIKey reconciler.
func TestPlan(t *testing.T) {
	p := planParams{revealTTL: planTTL}
	type state = keyState
	with, delivered := policyState, deliveredPolicyState
	past := metav1.NewTime(planNow.Add(-time.Minute))
	future := metav1.NewTime(planNow.Add(48 * time.Hour))
	tests := []struct {
		name string
		s    *state
		want planned
	}{
		// Lifecycle.
		{"an orphan hash Secret of a deleted namesake goes first", with(func(s *state) { s.orphans = []*corev1.Secret{{}} }), planned{do: "deleteOrphans"}},
		{"no APIKey, no orphan: nothing", &state{now: planNow}, planned{}},
		{"deleted with the finalizer: clean up", with(func(s *state) { s.key.DeletionTimestamp = &past }), planned{do: "cleanUp"}},
		{"deleted without the finalizer: nothing", with(func(s *state) { s.key.DeletionTimestamp = &past; s.key.Finalizers = nil }), planned{}},
		{"the finalizer before anything", with(func(s *state) { s.key.Finalizers = nil }), planned{do: "addFinalizer"}},
		// Revocation: decided by the spec alone.
		{"revoked with a hash: revoke", with(func(s *state) { s.key.Spec.Revoked = true }), planned{do: "revoke", found: keyFindings{revoked: true}}},
		{"revoked, only a reveal Secret left: revoke", with(func(s *state) { s.key.Spec.Revoked = true; s.hash = nil; s.key.Status.RevealSecretName = "" }),
			planned{do: "revoke", found: keyFindings{revoked: true}}},
		{"revoked and settled: nothing", with(func(s *state) {
			s.key.Spec.Revoked = true
			s.hash, s.reveal, s.reveals, s.key.Status.RevealSecretName = nil, nil, nil, ""
		}), planned{found: keyFindings{revoked: true}}},
		// Revocation the operator recorded itself (revokeWhenUnusedFor): the hash Secret stays.
		{"revoked by the operator's record, a reveal left: revoke", with(func(s *state) { keysecret.SetRevoked(s.hash, past.Time, switchboardv1alpha1.ReasonUnusedRevoked) }),
			planned{do: "revoke", found: keyFindings{revoked: true, revokedAt: past.Truncate(time.Second)}}},
		{"revoked by the operator's record and settled: nothing", with(func(s *state) {
			keysecret.SetRevoked(s.hash, past.Time, switchboardv1alpha1.ReasonUnusedRevoked)
			s.reveal, s.reveals, s.key.Status.RevealSecretName = nil, nil, ""
		}), planned{found: keyFindings{revoked: true, revokedAt: past.Truncate(time.Second)}}},
		{"revoked by the operator's record: a rotation issues nothing", with(func(s *state) {
			keysecret.SetRevoked(s.hash, past.Time, switchboardv1alpha1.ReasonUnusedRevoked)
			s.reveal, s.reveals, s.key.Status.RevealSecretName = nil, nil, ""
			s.key.Spec.Rotation.RequestedAt = "r9"
		}), planned{found: keyFindings{revoked: true, revokedAt: past.Truncate(time.Second)}}},
		{"a status saying revoked does not revoke", with(func(s *state) { s.key.Status.RevokedAt = &past }), planned{found: keyFindings{hash: hashFound}, after: 30 * time.Minute}},
		// Issue.
		{"a new APIKey gets its first key", &state{key: planKeyObj(0, false), now: planNow}, planned{do: "issue", gen: 1}},
		{"expired before its first key: none, ever", &state{key: func() *switchboardv1alpha1.APIKey {
			k := planKeyObj(0, false)
			k.Spec.ExpiresAt = &past
			return k
		}(), now: planNow}, planned{found: keyFindings{expired: true}}},
		{"a rotation the record has not carried out", with(func(s *state) { s.key.Spec.Rotation.RequestedAt = "r9" }),
			planned{do: "issue", gen: 3, grace: time.Hour}},
		{"an expired key is not rotated", with(func(s *state) { s.key.Spec.Rotation.RequestedAt = "r9"; s.key.Spec.ExpiresAt = &past }),
			planned{found: keyFindings{expired: true, hash: hashFound}, after: 30 * time.Minute}},
		{"no hash and a rotation: it replaces the lost hash", with(func(s *state) { s.hash = nil; s.key.Spec.Rotation.RequestedAt = "r9" }),
			planned{do: "issue", gen: 3, grace: time.Hour}},
		// Publish: the status is put back to the record, never the reverse.
		{"a forged lastHandledRotationAt", with(func(s *state) { s.key.Status.LastHandledRotationAt = "forged" }), planned{do: "publish", gen: 2}},
		{"a forged keyGeneration 0", with(func(s *state) { s.key.Status.KeyGeneration = 0 }), planned{do: "publish", gen: 2}},
		{"a generation behind the record (an issue stopped before its status)", with(func(s *state) { s.key.Status.KeyGeneration = 1 }), planned{do: "publish", gen: 2}},
		{"a forged hint", with(func(s *state) { s.key.Status.KeyHint = "other" }), planned{do: "publish", gen: 2}},
		// Delivery.
		{"delivered and held: nothing", delivered(nil), planned{found: keyFindings{hash: hashFound}}},
		{"delivery Secret not in the cache: check", delivered(func(s *state) { s.delivery = nil }), planned{do: "checkDelivery"}},
		{"delivery Secret gone: redeliver, the old key valid for RedeliveryGrace", delivered(func(s *state) { s.delivery, s.confirmed.delivery = nil, true }),
			planned{do: "issue", gen: 3, grace: RedeliveryGrace, lostHint: "h2"}},
		{"delivery Secret of this key holding another generation: redeliver", delivered(func(s *state) {
			s.delivery, s.confirmed.delivery = keysecret.NewDelivery(s.key, 1, "k1"), true
		}), planned{do: "issue", gen: 3, grace: RedeliveryGrace, lostHint: "h2"}},
		{"someone else's Secret under spec.secretName: conflict, the key stays", delivered(func(s *state) {
			s.delivery = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-key", Labels: keysecret.Selector(keysecret.ComponentDelivery)}}
		}), planned{found: keyFindings{hash: hashFound, conflict: deliveryConflict(delivered(nil).key)}, after: conflictRetry}},
		{"spec.secretName set after a reveal: delivery starts with the next key", with(func(s *state) { s.key.Spec.SecretName = "app-key" }),
			planned{found: keyFindings{hash: hashFound}, after: 30 * time.Minute}},
		// The hash Secret.
		{"no hash in the cache: check", with(func(s *state) { s.hash = nil }), planned{do: "checkHash"}},
		{"no hash at the API server: refused until rotated", with(func(s *state) { s.hash, s.confirmed.hash = nil, true }),
			planned{found: keyFindings{hash: hashMissing}, after: 30 * time.Minute}},
		{"a hash of an older switchboard: complete its record", with(func(s *state) {
			s.hash = keysecret.NewHash(s.key, "system", 2, apikey.Sum("h2"))
		}), planned{do: "completeRecord", found: keyFindings{hash: hashFound}}},
		{"a record without the deadline of a pending reveal: complete it", with(func(s *state) {
			keysecret.SetIssued(s.hash, keysecret.Issued{Hint: "h2", RotationHandled: "r1"})
		}), planned{do: "completeRecord", found: keyFindings{hash: hashFound}}},
		{"the previous key's grace runs", with(func(s *state) {
			keysecret.SetCurrent(s.hash, s.key, 2, apikey.Sum("h2"), time.Time{})
			s.hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
			s.hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(10 * time.Minute).Format(time.RFC3339))
		}), planned{found: keyFindings{hash: hashFound}, after: 10 * time.Minute}},
		{"the previous key's grace ended: drop it", with(func(s *state) {
			s.hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
			s.hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(-time.Second).Format(time.RFC3339))
		}), planned{do: "dropPrevious", found: keyFindings{hash: hashFound}}},
		// The one-time reveal.
		{"reveal pending: wake at its recorded deadline", with(nil), planned{found: keyFindings{hash: hashFound}, after: 30 * time.Minute}},
		{"a forged later deadline in the status changes nothing", with(func(s *state) { s.key.Status.RevealExpiresAt = &future }),
			planned{found: keyFindings{hash: hashFound}, after: 30 * time.Minute}},
		{"the recorded deadline passed: expire the reveal", with(func(s *state) { s.now = planNow.Add(time.Hour) }),
			planned{do: "expireReveal", found: keyFindings{hash: hashFound}}},
		{"reveal Secret not in the cache: check", with(func(s *state) { s.reveal, s.reveals = nil, nil }), planned{do: "checkReveal", found: keyFindings{hash: hashFound}}},
		{"reveal Secret gone before the deadline: claimed", with(func(s *state) { s.reveal, s.reveals, s.confirmed.reveal = nil, nil, true }),
			planned{found: keyFindings{hash: hashFound, reveal: switchboardv1alpha1.ReasonRevealClaimed}}},
		{"reveal Secret gone after the deadline: expired", with(func(s *state) {
			s.reveal, s.reveals, s.confirmed.reveal, s.now = nil, nil, true, planNow.Add(time.Hour)
		}), planned{found: keyFindings{hash: hashFound, reveal: switchboardv1alpha1.ReasonRevealExpired}}},
		{"someone else's Secret under the reveal name is no reveal", with(func(s *state) {
			s.reveal = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keysecret.RevealName("ci", 2)}}
			s.reveals, s.confirmed.reveal = nil, true
		}), planned{found: keyFindings{hash: hashFound, reveal: switchboardv1alpha1.ReasonRevealClaimed}}},
		{"reveal Secrets of older generations: sweep", with(func(s *state) {
			s.reveals = append(s.reveals, keysecret.NewReveal(s.key, 1, "k1"))
		}), planned{do: "sweep", found: keyFindings{hash: hashFound}, after: 30 * time.Minute}},
		// Time.
		{"wake at expiry", with(func(s *state) {
			e := metav1.NewTime(planNow.Add(5 * time.Minute))
			s.key.Spec.ExpiresAt = &e
		}), planned{found: keyFindings{hash: hashFound}, after: 5 * time.Minute}},
		{"expired: no wake-up for the expiry", with(func(s *state) { s.key.Spec.ExpiresAt = &past }),
			planned{found: keyFindings{expired: true, hash: hashFound}, after: 30 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planOf(tt.s, p)
			if !got.matches(tt.want) {
				t.Fatalf("plan = %+v;\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestPlanKey: the record of issuance, not the status, decides whether to issue, rotate or put
// the status back (moved here from before the reshape, unchanged).
func TestPlanKey(t *testing.T) {
	rotation := func(at string) *switchboardv1alpha1.APIKeyRotation {
		return &switchboardv1alpha1.APIKeyRotation{RequestedAt: at}
	}
	status := func(gen int64, hint, handled string) switchboardv1alpha1.APIKeyStatus {
		return switchboardv1alpha1.APIKeyStatus{KeyGeneration: gen, KeyHint: hint, LastHandledRotationAt: handled}
	}
	rec := &keysecret.Issued{Generation: 2, Hint: "h2", RotationHandled: "r1"}
	tests := []struct {
		name     string
		rotation *switchboardv1alpha1.APIKeyRotation
		status   switchboardv1alpha1.APIKeyStatus
		rec      *keysecret.Issued
		action   keyAction
		gen      int64
	}{
		{name: "a new APIKey gets its first key", action: issueKey, gen: 1},
		{name: "no hash, status says issued: the key is refused, nothing to issue", status: status(3, "h3", ""), action: keepKey, gen: 3},
		{name: "no hash and a rotation: it replaces the lost hash", rotation: rotation("r9"), status: status(3, "h3", "r1"), action: issueKey, gen: 4},
		{name: "no hash, a forged negative generation", status: status(-5, "", ""), action: issueKey, gen: 1},
		{name: "the record and the status agree", rotation: rotation("r1"), status: status(2, "h2", "r1"), rec: rec, action: keepKey, gen: 2},
		{name: "a rotation the record has not carried out", rotation: rotation("r2"), status: status(2, "h2", "r1"), rec: rec, action: issueKey, gen: 3},
		{name: "a forged lastHandledRotationAt is no rotation", rotation: rotation("r1"), status: status(2, "h2", "forged"), rec: rec, action: publishKey, gen: 2},
		{name: "a forged lastHandledRotationAt matching a new request still rotates once", rotation: rotation("r2"), status: status(2, "h2", "r2"), rec: rec, action: issueKey, gen: 3},
		{name: "a forged keyGeneration 0 issues nothing", rotation: rotation("r1"), status: status(0, "", ""), rec: rec, action: publishKey, gen: 2},
		{name: "a generation ahead of the record", rotation: rotation("r1"), status: status(7, "h2", "r1"), rec: rec, action: publishKey, gen: 2},
		{name: "a generation behind the record (an issue stopped before its status)", rotation: rotation("r1"), status: status(1, "h1", ""), rec: rec, action: publishKey, gen: 2},
		{name: "a forged hint", rotation: rotation("r1"), status: status(2, "other", "r1"), rec: rec, action: publishKey, gen: 2},
		{name: "rotation removed from the spec: nothing to do", status: status(2, "h2", "r1"), rec: rec, action: keepKey, gen: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{Rotation: tt.rotation}, Status: tt.status}
			action, gen := planKey(key, tt.rec)
			if action != tt.action || gen != tt.gen {
				t.Fatalf("planKey = %d, generation %d; want %d, generation %d", action, gen, tt.action, tt.gen)
			}
		})
	}
}
