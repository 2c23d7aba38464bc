package grace

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
	planNow     = keystatetest.Now
	policyState = keystatetest.State
)

// graceState is generation 2 of an APIKey that asks for its grace to end on evidence after 10m
// unused, rotated (its new key written) 15 minutes before planNow, the old key (generation 1)
// accepted for a day more; delivered into app-key or revealed, changed by f.
func graceState(delivered bool, f func(s *keystate.State)) *keystate.State {
	base := keystatetest.State
	if delivered {
		base = keystatetest.Delivered
	}
	return base(func(s *keystate.State) {
		s.Key.Spec.GraceEndsWhenUnusedFor = &metav1.Duration{Duration: 10 * time.Minute}
		rec, _ := keysecret.IssuedOf(s.Hash)
		rec.IssuedAt = planNow.Add(-15 * time.Minute)
		keysecret.SetIssued(s.Hash, rec)
		s.Hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
		s.Hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(24 * time.Hour).Format(time.RFC3339))
		if f != nil {
			f(s)
		}
	})
}

// usedAt records a use of the old key generation gen at planNow - ago in s's status.
func usedAt(s *keystate.State, gen int64, ago time.Duration) {
	s.Key.Status.PreviousKeyUse = &switchboardv1alpha1.APIKeyPreviousKeyUse{KeyGeneration: gen, LastUsedAt: metav1.NewTime(planNow.Add(-ago))}
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

// TestPolicies: a table for each policy of the grace, each policy alone: when it decides, with which
// action, and when it leaves the decision to the policies after it.
func TestPolicies(t *testing.T) {
	p := keystate.Params{RevealTTL: keystatetest.TTL, ExpiryWarning: 7 * 24 * time.Hour, UnusedAfter: 90 * 24 * time.Hour}
	tables := map[string][]policyCase{
		"GraceEndsOnEvidence": {
			{"the old key unused for the quiet period, not delivered", graceState(false, nil), true, "dropPrevious"},
			{"the old key used within it", graceState(false, func(s *keystate.State) { usedAt(s, 1, time.Minute) }), false, ""},
			{"delivered, a pod holds the old key", graceState(true, func(s *keystate.State) {
				s.Consumers = &keystate.Consumers{Holders: []string{"api-1 (deployment/api)"}}
			}), false, ""},
			{"delivered, workloads not readable", graceState(true, func(s *keystate.State) { s.Consumers = &keystate.Consumers{Unreadable: "forbidden"} }), false, ""},
			{"delivered, every pod restarted", graceState(true, func(s *keystate.State) { s.Consumers = &keystate.Consumers{} }), true, "dropPrevious"},
			{"not asked for", graceState(false, func(s *keystate.State) { s.Key.Spec.GraceEndsWhenUnusedFor = nil }), false, ""},
		},
		"GraceEnded": {
			{"ended", policyState(func(s *keystate.State) {
				s.Hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
				s.Hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(-time.Second).Format(time.RFC3339))
			}), true, "dropPrevious"},
			{"running", policyState(func(s *keystate.State) {
				s.Hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
				s.Hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(time.Minute).Format(time.RFC3339))
			}), false, ""},
		},
	}
	keystatetest.RunPolicies(t, Policies, p, tables, policyCase.unpack, Observe)
}
