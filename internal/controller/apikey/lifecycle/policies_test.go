package lifecycle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestPolicies: a table for each policy of the lifecycle, each policy alone: when it decides, with which
// action, and when it leaves the decision to the policies after it.
func TestPolicies(t *testing.T) {
	p := keystate.Params{RevealTTL: keystatetest.TTL, ExpiryWarning: 7 * 24 * time.Hour, UnusedAfter: 90 * 24 * time.Hour}
	past := metav1.NewTime(planNow.Add(-time.Minute))
	day := 24 * time.Hour
	tables := map[string][]policyCase{
		"UnusedTooLong": {
			{"unused past revokeWhenUnusedFor", policyState(func(s *keystate.State) {
				s.Key.Spec.RevokeWhenUnusedFor = &metav1.Duration{Duration: 45 * day}
				s.Key.CreationTimestamp = metav1.NewTime(planNow.Add(-46 * day))
			}), true, "revokeUnused"},
			{"used since", policyState(func(s *keystate.State) {
				s.Key.Spec.RevokeWhenUnusedFor = &metav1.Duration{Duration: 45 * day}
				s.Key.CreationTimestamp = metav1.NewTime(planNow.Add(-46 * day))
				s.Key.Status.LastUsedAt = &past
			}), false, ""},
			{"no hash to record it in", policyState(func(s *keystate.State) {
				s.Key.Spec.RevokeWhenUnusedFor = &metav1.Duration{Duration: 45 * day}
				s.Key.CreationTimestamp = metav1.NewTime(planNow.Add(-46 * day))
				s.Hash = nil
			}), false, ""},
		},
		"LifetimeNotRecorded": {
			{"a lifetime set after the issue", policyState(func(s *keystate.State) { s.Key.Spec.Lifetime = &metav1.Duration{Duration: 30 * day} }), true, "recordLife"},
			{"none, none recorded", policyState(nil), false, ""},
		},
		"RenewalDue": {
			{"due", func() *keystate.State {
				s := deliveredPolicyState(func(s *keystate.State) {
					s.Key.Spec.Lifetime, s.Key.Spec.RenewBefore = &metav1.Duration{Duration: 30 * day}, &metav1.Duration{Duration: 7 * day}
				})
				keysecret.SetIssued(s.Hash, keysecret.Issued{Hint: "h2", RotationHandled: "r1", Delivery: "app-key", IssuedAt: planNow.Add(-25 * day), NotAfter: planNow.Add(5 * day)})
				return s
			}(), true, "Issue"},
			{"not yet", func() *keystate.State {
				s := deliveredPolicyState(func(s *keystate.State) {
					s.Key.Spec.Lifetime, s.Key.Spec.RenewBefore = &metav1.Duration{Duration: 30 * day}, &metav1.Duration{Duration: 7 * day}
				})
				keysecret.SetIssued(s.Hash, keysecret.Issued{Hint: "h2", RotationHandled: "r1", Delivery: "app-key", IssuedAt: planNow.Add(-day), NotAfter: planNow.Add(29 * day)})
				return s
			}(), false, ""},
		},
	}
	keystatetest.RunPolicies(t, Policies, p, tables, policyCase.unpack, Observe)
}
