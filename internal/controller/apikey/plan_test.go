package apikey

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/issuing"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate/keystatetest"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/readiness"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The plan's table: every transition of the APIKey reconciler, decided in microseconds from
// a keystate.State built by hand. The envtest suites check that the steps do what they say.

// The states of these tables (keystatetest).
var (
	planNow              = keystatetest.Now
	planKeyObj           = keystatetest.Key
	hintOfGen            = keystatetest.HintOfGen
	rotationOfGen        = keystatetest.RotationOfGen
	planHash             = keystatetest.Hash
	policyState          = keystatetest.State
	deliveredPolicyState = keystatetest.Delivered
)

const planTTL = keystatetest.TTL

// planned is what plan decided, in the terms the tables write: the action (by its type's name,
// "none" for none), its generation, grace and lost hint, the facts, the wake-up and the policy.
type planned struct {
	do       string
	gen      int64
	grace    time.Duration
	lostHint string
	found    readiness.Findings
	after    time.Duration
	problem  string
	policy   string
}

// planOf runs plan on s and says what it decided.
func planOf(s *keystate.State, p keystate.Params) planned {
	obs, d := plan(s, p)
	got := planned{do: "none", gen: d.Gen, after: obs.Wake.After, problem: d.Problem, policy: d.Policy}
	if d.Do != nil {
		got.do = reflect.TypeOf(d.Do).Name()
	}
	if i, ok := d.Do.(issuing.Issue); ok {
		got.grace, got.lostHint = i.Grace, i.LostHint
	}
	got.found = readiness.FindingsOf(obs, d, keystate.Outcome{}, obs.Life)
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
		got.problem == want.problem && f.Revoked == w.Revoked && f.RevokedAt.Equal(w.RevokedAt) && f.Expired == w.Expired &&
		(w.Conflict == "" || f.Conflict == w.Conflict) && (w.Hash == keystate.HashUnknown || f.Hash == w.Hash) &&
		(w.Reveal == "" || f.Reveal == w.Reveal) && (want.after == 0 || got.after == want.after)
}

// TestPlan: the chain as a whole, on the transitions of the APIKey reconciler.
func TestPlan(t *testing.T) {
	p := keystate.Params{RevealTTL: planTTL}
	type state = keystate.State
	with, delivered := policyState, deliveredPolicyState
	past := metav1.NewTime(planNow.Add(-time.Minute))
	future := metav1.NewTime(planNow.Add(48 * time.Hour))
	tests := []struct {
		name string
		s    *state
		want planned
	}{
		// Lifecycle.
		{"an orphan hash Secret of a deleted namesake goes first", with(func(s *state) { s.Orphans = []*corev1.Secret{{}} }), planned{do: "deleteOrphans"}},
		{"no APIKey, no orphan: nothing", &state{Now: planNow}, planned{}},
		{"deleted with the finalizer: clean up", with(func(s *state) { s.Key.DeletionTimestamp = &past }), planned{do: "cleanUp"}},
		{"deleted without the finalizer: nothing", with(func(s *state) { s.Key.DeletionTimestamp = &past; s.Key.Finalizers = nil }), planned{}},
		{"the finalizer before anything", with(func(s *state) { s.Key.Finalizers = nil }), planned{do: "addFinalizer"}},
		// Revocation: decided by the spec alone.
		{"revoked with a hash: revoke", with(func(s *state) { s.Key.Spec.Revoked = true }), planned{do: "revoke", found: readiness.Findings{Revoked: true}}},
		{"revoked, only a reveal Secret left: revoke", with(func(s *state) { s.Key.Spec.Revoked = true; s.Hash = nil; s.Key.Status.RevealSecretName = "" }),
			planned{do: "revoke", found: readiness.Findings{Revoked: true}}},
		{"revoked and settled: nothing", with(func(s *state) {
			s.Key.Spec.Revoked = true
			s.Hash, s.Reveal, s.Reveals, s.Key.Status.RevealSecretName = nil, nil, nil, ""
		}), planned{found: readiness.Findings{Revoked: true}}},
		// Revocation the operator recorded itself (revokeWhenUnusedFor): the hash Secret stays.
		{"revoked by the operator's record, a reveal left: revoke", with(func(s *state) { keysecret.SetRevoked(s.Hash, past.Time, switchboardv1alpha1.ReasonUnusedRevoked) }),
			planned{do: "revoke", found: readiness.Findings{Revoked: true, RevokedAt: past.Truncate(time.Second)}}},
		{"revoked by the operator's record and settled: nothing", with(func(s *state) {
			keysecret.SetRevoked(s.Hash, past.Time, switchboardv1alpha1.ReasonUnusedRevoked)
			s.Reveal, s.Reveals, s.Key.Status.RevealSecretName = nil, nil, ""
		}), planned{found: readiness.Findings{Revoked: true, RevokedAt: past.Truncate(time.Second)}}},
		{"revoked by the operator's record: a rotation issues nothing", with(func(s *state) {
			keysecret.SetRevoked(s.Hash, past.Time, switchboardv1alpha1.ReasonUnusedRevoked)
			s.Reveal, s.Reveals, s.Key.Status.RevealSecretName = nil, nil, ""
			s.Key.Spec.Rotation.RequestedAt = "r9"
		}), planned{found: readiness.Findings{Revoked: true, RevokedAt: past.Truncate(time.Second)}}},
		{"a status saying revoked does not revoke", with(func(s *state) { s.Key.Status.RevokedAt = &past }), planned{found: readiness.Findings{Hash: keystate.HashFound}, after: 30 * time.Minute}},
		// Issue.
		{"a new APIKey gets its first key", &state{Key: planKeyObj(0, false), Now: planNow}, planned{do: "Issue", gen: 1}},
		{"expired before its first key: none, ever", &state{Key: func() *switchboardv1alpha1.APIKey {
			k := planKeyObj(0, false)
			k.Spec.ExpiresAt = &past
			return k
		}(), Now: planNow}, planned{found: readiness.Findings{Expired: true}}},
		{"a rotation the record has not carried out", with(func(s *state) { s.Key.Spec.Rotation.RequestedAt = "r9" }),
			planned{do: "Issue", gen: 3, grace: time.Hour}},
		{"an expired key is not rotated", with(func(s *state) { s.Key.Spec.Rotation.RequestedAt = "r9"; s.Key.Spec.ExpiresAt = &past }),
			planned{found: readiness.Findings{Expired: true, Hash: keystate.HashFound}, after: 30 * time.Minute}},
		{"no hash and a rotation: it replaces the lost hash", with(func(s *state) { s.Hash = nil; s.Key.Spec.Rotation.RequestedAt = "r9" }),
			planned{do: "Issue", gen: 3, grace: time.Hour}},
		// Publish: the status is put back to the record, never the reverse.
		{"a forged lastHandledRotationAt", with(func(s *state) { s.Key.Status.LastHandledRotationAt = "forged" }), planned{do: "publish", gen: 2}},
		{"a forged keyGeneration 0", with(func(s *state) { s.Key.Status.KeyGeneration = 0 }), planned{do: "publish", gen: 2}},
		{"a generation behind the record (an issue stopped before its status)", with(func(s *state) { s.Key.Status.KeyGeneration = 1 }), planned{do: "publish", gen: 2}},
		{"a forged hint", with(func(s *state) { s.Key.Status.KeyHint = "other" }), planned{do: "publish", gen: 2}},
		// Delivery.
		{"delivered and held: nothing", delivered(nil), planned{found: readiness.Findings{Hash: keystate.HashFound}}},
		{"delivery Secret not in the cache: check", delivered(func(s *state) { s.Delivery = nil }), planned{do: "checkDelivery"}},
		{"delivery Secret gone: redeliver, the old key valid for RedeliveryGrace", delivered(func(s *state) { s.Delivery, s.Confirmed.Delivery = nil, true }),
			planned{do: "Issue", gen: 3, grace: issuing.RedeliveryGrace, lostHint: "h2"}},
		{"delivery Secret of this key holding another generation: redeliver", delivered(func(s *state) {
			s.Delivery, s.Confirmed.Delivery = keysecret.NewDelivery(s.Key, 1, "k1"), true
		}), planned{do: "Issue", gen: 3, grace: issuing.RedeliveryGrace, lostHint: "h2"}},
		{"someone else's Secret under spec.secretName: conflict, the key stays", delivered(func(s *state) {
			s.Delivery = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-key", Labels: keysecret.Selector(keysecret.ComponentDelivery)}}
		}), planned{found: readiness.Findings{Hash: keystate.HashFound, Conflict: keystate.DeliveryConflict(delivered(nil).Key)}, after: keystate.ConflictRetry}},
		{"spec.secretName set after a reveal: delivery starts with the next key", with(func(s *state) { s.Key.Spec.SecretName = "app-key" }),
			planned{found: readiness.Findings{Hash: keystate.HashFound}, after: 30 * time.Minute}},
		// The hash Secret.
		{"no hash in the cache: check", with(func(s *state) { s.Hash = nil }), planned{do: "checkHash"}},
		{"no hash at the API server: refused until rotated", with(func(s *state) { s.Hash, s.Confirmed.Hash = nil, true }),
			planned{found: readiness.Findings{Hash: keystate.HashMissing}, after: 30 * time.Minute}},
		{"a hash of an older switchboard: complete its record", with(func(s *state) {
			s.Hash = keysecret.NewHash(s.Key, "system", 2, apikey.Sum("h2"))
		}), planned{do: "completeRecord", found: readiness.Findings{Hash: keystate.HashFound}}},
		{"a record without the deadline of a pending reveal: complete it", with(func(s *state) {
			keysecret.SetIssued(s.Hash, keysecret.Issued{Hint: "h2", RotationHandled: "r1"})
		}), planned{do: "completeRecord", found: readiness.Findings{Hash: keystate.HashFound}}},
		{"the previous key's grace runs", with(func(s *state) {
			keysecret.SetCurrent(s.Hash, s.Key, 2, apikey.Sum("h2"), time.Time{})
			s.Hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
			s.Hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(10 * time.Minute).Format(time.RFC3339))
		}), planned{found: readiness.Findings{Hash: keystate.HashFound}, after: 10 * time.Minute}},
		{"the previous key's grace ended: drop it", with(func(s *state) {
			s.Hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
			s.Hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(-time.Second).Format(time.RFC3339))
		}), planned{do: "dropPrevious", found: readiness.Findings{Hash: keystate.HashFound}}},
		// The binding record: after the record of issue, before the old key's grace.
		{"spec.binding not recorded: record it", delivered(func(s *state) {
			s.Key.Spec.Binding = &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}
		}), planned{do: "record", found: readiness.Findings{Hash: keystate.HashFound}}},
		{"spec.binding not recorded, the record incomplete: the record first", delivered(func(s *state) {
			s.Key.Spec.Binding = &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}
			s.Hash = keysecret.NewHash(s.Key, "system", 2, apikey.Sum("h2"))
		}), planned{do: "completeRecord", found: readiness.Findings{Hash: keystate.HashFound}}},
		{"spec.binding not recorded, the previous key's grace ended: the binding first", delivered(func(s *state) {
			s.Key.Spec.Binding = &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}
			s.Hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
			s.Hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(-time.Second).Format(time.RFC3339))
		}), planned{do: "record", found: readiness.Findings{Hash: keystate.HashFound}}},
		{"a binding record without spec.binding: remove it", delivered(func(s *state) {
			s.Hash.Data[keysecret.DataBinding] = keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce}.Encode()
		}), planned{do: "record", found: readiness.Findings{Hash: keystate.HashFound}}},
		// The one-time reveal.
		{"reveal pending: wake at its recorded deadline", with(nil), planned{found: readiness.Findings{Hash: keystate.HashFound}, after: 30 * time.Minute}},
		{"a forged later deadline in the status changes nothing", with(func(s *state) { s.Key.Status.RevealExpiresAt = &future }),
			planned{found: readiness.Findings{Hash: keystate.HashFound}, after: 30 * time.Minute}},
		{"the recorded deadline passed: expire the reveal", with(func(s *state) { s.Now = planNow.Add(time.Hour) }),
			planned{do: "expireReveal", found: readiness.Findings{Hash: keystate.HashFound}}},
		{"reveal Secret not in the cache: check", with(func(s *state) { s.Reveal, s.Reveals = nil, nil }), planned{do: "checkReveal", found: readiness.Findings{Hash: keystate.HashFound}}},
		{"reveal Secret gone before the deadline: claimed", with(func(s *state) { s.Reveal, s.Reveals, s.Confirmed.Reveal = nil, nil, true }),
			planned{found: readiness.Findings{Hash: keystate.HashFound, Reveal: switchboardv1alpha1.ReasonRevealClaimed}}},
		{"reveal Secret gone after the deadline: expired", with(func(s *state) {
			s.Reveal, s.Reveals, s.Confirmed.Reveal, s.Now = nil, nil, true, planNow.Add(time.Hour)
		}), planned{found: readiness.Findings{Hash: keystate.HashFound, Reveal: switchboardv1alpha1.ReasonRevealExpired}}},
		{"someone else's Secret under the reveal name is no reveal", with(func(s *state) {
			s.Reveal = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keysecret.RevealName("ci", 2)}}
			s.Reveals, s.Confirmed.Reveal = nil, true
		}), planned{found: readiness.Findings{Hash: keystate.HashFound, Reveal: switchboardv1alpha1.ReasonRevealClaimed}}},
		{"reveal Secrets of older generations: sweep", with(func(s *state) {
			s.Reveals = append(s.Reveals, keysecret.NewReveal(s.Key, 1, "k1"))
		}), planned{do: "sweep", found: readiness.Findings{Hash: keystate.HashFound}, after: 30 * time.Minute}},
		// Time.
		{"wake at expiry", with(func(s *state) {
			e := metav1.NewTime(planNow.Add(5 * time.Minute))
			s.Key.Spec.ExpiresAt = &e
		}), planned{found: readiness.Findings{Hash: keystate.HashFound}, after: 5 * time.Minute}},
		{"expired: no wake-up for the expiry", with(func(s *state) { s.Key.Spec.ExpiresAt = &past }),
			planned{found: readiness.Findings{Expired: true, Hash: keystate.HashFound}, after: 30 * time.Minute}},
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
