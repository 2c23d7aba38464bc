package issuing

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate/keystatetest"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The states of these tables (keystatetest).
var (
	planNow              = keystatetest.Now
	planKeyObj           = keystatetest.Key
	policyState          = keystatetest.State
	deliveredPolicyState = keystatetest.Delivered
)

// policyCase is one input of one policy and what it should decide: nothing (decided false),
// or an action by its type's name ("none": decided, nothing to do).
type policyCase struct {
	name    string
	s       *keystate.State
	decided bool
	do      string
}

func (c policyCase) unpack() (string, *keystate.State, bool, string) {
	return c.name, c.s, c.decided, c.do
}

// TestPolicies: a table for each policy of the issuing chains, each policy alone: when it decides, with which
// action, and when it leaves the decision to the policies after it.
func TestPolicies(t *testing.T) {
	p := keystate.Params{RevealTTL: keystatetest.TTL, ExpiryWarning: 7 * 24 * time.Hour, UnusedAfter: 90 * 24 * time.Hour}
	past := metav1.NewTime(planNow.Add(-time.Minute))
	tables := map[string][]policyCase{
		"StatusBehindRecord": {
			{"a forged hint", policyState(func(s *keystate.State) { s.Key.Status.KeyHint = "other" }), true, "publish"},
			{"in line", policyState(nil), false, ""},
		},
		"KeyToIssue": {
			{"a first key", &keystate.State{Key: planKeyObj(0, false), Now: planNow}, true, "Issue"},
			{"a rotation", policyState(func(s *keystate.State) { s.Key.Spec.Rotation.RequestedAt = "r9" }), true, "Issue"},
			{"a rotation of an expired key", policyState(func(s *keystate.State) { s.Key.Spec.Rotation.RequestedAt = "r9"; s.Key.Spec.ExpiresAt = &past }), false, ""},
			{"nothing asked", policyState(nil), false, ""},
		},
		"ExpiredBeforeFirstKey": {
			{"expired, no key", &keystate.State{Key: func() *switchboardv1alpha1.APIKey {
				k := planKeyObj(0, false)
				k.Spec.ExpiresAt = &past
				return k
			}(), Now: planNow}, true, "none"},
			{"a first key to issue", &keystate.State{Key: planKeyObj(0, false), Now: planNow}, false, ""},
		},
		"TemplateNotApplied": {
			{"not applied", deliveredPolicyState(func(s *keystate.State) {
				s.Key.Spec.SecretTemplate = &switchboardv1alpha1.APIKeySecretTemplate{Labels: map[string]string{"app": "x"}}
			}), true, "applyTemplate"},
			{"applied", deliveredPolicyState(nil), false, ""},
			{"revealed, not delivered", policyState(nil), false, ""},
		},
		"DeliveryUnconfirmed": {
			{"not in the cache", deliveredPolicyState(func(s *keystate.State) { s.Delivery = nil }), true, "checkDelivery"},
			{"confirmed gone", deliveredPolicyState(func(s *keystate.State) { s.Delivery, s.Confirmed.Delivery = nil, true }), false, ""},
			{"held", deliveredPolicyState(nil), false, ""},
		},
		"DeliveryLost": {
			{"gone", deliveredPolicyState(func(s *keystate.State) { s.Delivery, s.Confirmed.Delivery = nil, true }), true, "Issue"},
			{"someone else's Secret", deliveredPolicyState(func(s *keystate.State) {
				s.Delivery = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-key"}}
			}), false, ""},
			{"held", deliveredPolicyState(nil), false, ""},
		},
		"HashUnconfirmed": {
			{"none in the cache", policyState(func(s *keystate.State) { s.Hash = nil }), true, "checkHash"},
			{"confirmed gone", policyState(func(s *keystate.State) { s.Hash, s.Confirmed.Hash = nil, true }), false, ""},
			{"there", policyState(nil), false, ""},
		},
		"HashBehindStatus": {
			{"behind, confirmed", policyState(func(s *keystate.State) {
				s.Hash, s.Confirmed.Hash = keysecret.NewHash(s.Key, "system", 1, apikey.Sum("h1")), true
			}), true, "none"},
			{"in line", policyState(nil), false, ""},
		},
		"RecordIncomplete": {
			{"an older switchboard's hash", policyState(func(s *keystate.State) { s.Hash = keysecret.NewHash(s.Key, "system", 2, apikey.Sum("h2")) }), true, "completeRecord"},
			{"complete", policyState(nil), false, ""},
		},
		"RevealDeadlinePassed": {
			{"passed", policyState(func(s *keystate.State) { s.Now = planNow.Add(time.Hour) }), true, "expireReveal"},
			{"a forged later deadline in the status", policyState(func(s *keystate.State) {
				s.Now = planNow.Add(time.Hour)
				future := metav1.NewTime(planNow.Add(48 * time.Hour))
				s.Key.Status.RevealExpiresAt = &future
			}), true, "expireReveal"},
			{"pending", policyState(nil), false, ""},
		},
		"RevealUnconfirmed": {
			{"not in the cache", policyState(func(s *keystate.State) { s.Reveal, s.Reveals = nil, nil }), true, "checkReveal"},
			{"confirmed gone", policyState(func(s *keystate.State) { s.Reveal, s.Reveals, s.Confirmed.Reveal = nil, nil, true }), false, ""},
			{"there", policyState(nil), false, ""},
		},
		"OldReveals": {
			{"an older generation's", policyState(func(s *keystate.State) { s.Reveals = append(s.Reveals, keysecret.NewReveal(s.Key, 1, "k1")) }), true, "sweep"},
			{"only the current one", policyState(nil), false, ""},
		},
	}
	keystatetest.RunPolicies(t, slices.Concat(Policies, RecordPolicies, RevealPolicies), p, tables, policyCase.unpack, Observe)
}
