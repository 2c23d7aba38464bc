package leak

import (
	"testing"
	"time"

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
	policyState          = keystatetest.State
	deliveredPolicyState = keystatetest.Delivered
)

// reportLeak gives s a LeakReport of the hash its hash Secret holds under data key k.
func reportLeak(s *keystate.State, k string) {
	sum := string(s.Hash.Data[k])
	s.Leaks = map[string]*switchboardv1alpha1.LeakReport{sum: {Spec: switchboardv1alpha1.LeakReportSpec{KeyHash: sum}}}
}

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

// TestPolicies: a table for each policy of the leak response, each policy alone: when it decides, with which
// action, and when it leaves the decision to the policies after it.
func TestPolicies(t *testing.T) {
	p := keystate.Params{RevealTTL: keystatetest.TTL, ExpiryWarning: 7 * 24 * time.Hour, UnusedAfter: 90 * 24 * time.Hour}
	past := metav1.NewTime(planNow.Add(-time.Minute))
	tables := map[string][]policyCase{
		"Leaked": {
			{"the current key reported", policyState(func(s *keystate.State) { reportLeak(s, keysecret.DataHash) }), true, "refuseLeaked"},
			{"the current key of an expired APIKey reported", policyState(func(s *keystate.State) {
				reportLeak(s, keysecret.DataHash)
				s.Key.Spec.ExpiresAt = &past
			}), true, "refuseLeaked"},
			{"the previous key, in grace, reported", policyState(func(s *keystate.State) {
				keysecret.SetCurrent(s.Hash, s.Key, 3, apikey.Sum("k3"), planNow.Add(time.Hour))
				reportLeak(s, keysecret.DataPreviousHash)
			}), true, "refuseLeaked"},
			{"refused, its replacement not issued", policyState(func(s *keystate.State) {
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: string(s.Hash.Data[keysecret.DataHash]), Generation: 2})
			}), true, "refuseLeaked"},
			{"refused, its replacement held back", policyState(func(s *keystate.State) {
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: string(s.Hash.Data[keysecret.DataHash]), Generation: 2, ReplaceAfter: planNow.Add(time.Second)})
			}), false, ""},
			{"refused, its replacement held back until now", policyState(func(s *keystate.State) {
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: string(s.Hash.Data[keysecret.DataHash]), Generation: 2, ReplaceAfter: planNow})
			}), true, "refuseLeaked"},
			{"refused and replaced, the report seen again", policyState(func(s *keystate.State) {
				reportLeak(s, keysecret.DataHash)
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: string(s.Hash.Data[keysecret.DataHash]), Generation: 2})
				keysecret.SetCurrent(s.Hash, s.Key, 3, apikey.Sum("k3"), time.Time{})
			}), false, ""},
			{"a report of another hash", policyState(func(s *keystate.State) {
				s.Leaks = map[string]*switchboardv1alpha1.LeakReport{apikey.Sum("other").String(): {}}
			}), false, ""},
			{"no report", policyState(nil), false, ""},
			{"replaced with an overlap, the leaked key still accepted", deliveredPolicyState(func(s *keystate.State) {
				leaked := string(s.Hash.Data[keysecret.DataHash])
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: leaked, Generation: 2, AcceptedUntil: planNow.Add(time.Minute)})
				keysecret.SetCurrent(s.Hash, s.Key, 3, apikey.Sum("k3"), planNow.Add(time.Minute))
				reportLeak(s, keysecret.DataPreviousHash)
			}), false, ""},
			{"replaced with an overlap that ended", deliveredPolicyState(func(s *keystate.State) {
				leaked := string(s.Hash.Data[keysecret.DataHash])
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: leaked, Generation: 2, AcceptedUntil: planNow})
				keysecret.SetCurrent(s.Hash, s.Key, 3, apikey.Sum("k3"), planNow)
				reportLeak(s, keysecret.DataPreviousHash)
			}), true, "refuseLeaked"},
		},
		"LeakRollout": {
			{"replaced, its rollout pending", deliveredPolicyState(func(s *keystate.State) {
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1, Rollout: keysecret.RolloutPending})
			}), true, "rollLeaked"},
			{"not replaced yet", deliveredPolicyState(func(s *keystate.State) {
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: string(s.Hash.Data[keysecret.DataHash]), Generation: 2, Rollout: keysecret.RolloutPending})
			}), false, ""},
			{"rolled already", deliveredPolicyState(func(s *keystate.State) {
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1, Rollout: "1 workload rolled (Deployment/web)"})
			}), false, ""},
			{"a leak recorded before rollouts were", deliveredPolicyState(func(s *keystate.State) {
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1})
			}), false, ""},
			{"no longer delivered", deliveredPolicyState(func(s *keystate.State) {
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1, Rollout: keysecret.RolloutPending})
				s.Key.Spec.SecretName = "elsewhere"
			}), false, ""},
			{"expired", deliveredPolicyState(func(s *keystate.State) {
				keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1, Rollout: keysecret.RolloutPending})
				s.Key.Spec.ExpiresAt = &past
			}), false, ""},
			{"no leak", deliveredPolicyState(nil), false, ""},
		},
	}
	keystatetest.RunPolicies(t, Policies, p, tables, policyCase.unpack, Observe)
}
