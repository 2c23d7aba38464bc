package objectlife

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate/keystatetest"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// The states of these tables (keystatetest).
var (
	planNow     = keystatetest.Now
	policyState = keystatetest.State
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

// TestPolicies: a table for each policy of the object's own life and revocation, each policy alone: when it decides, with which
// action, and when it leaves the decision to the policies after it.
func TestPolicies(t *testing.T) {
	p := keystate.Params{RevealTTL: keystatetest.TTL, ExpiryWarning: 7 * 24 * time.Hour, UnusedAfter: 90 * 24 * time.Hour}
	past := metav1.NewTime(planNow.Add(-time.Minute))
	tables := map[string][]policyCase{
		"OrphanHashes": {
			{"an orphan", policyState(func(s *keystate.State) { s.Orphans = []*corev1.Secret{{}} }), true, "deleteOrphans"},
			{"none", policyState(nil), false, ""},
		},
		"APIKeyGone": {
			{"gone", &keystate.State{Now: planNow}, true, "none"},
			{"there", policyState(nil), false, ""},
		},
		"BeingDeleted": {
			{"with the finalizer", policyState(func(s *keystate.State) { s.Key.DeletionTimestamp = &past }), true, "cleanUp"},
			{"without it", policyState(func(s *keystate.State) { s.Key.DeletionTimestamp = &past; s.Key.Finalizers = nil }), true, "none"},
			{"not deleted", policyState(nil), false, ""},
		},
		"NoFinalizer": {
			{"none", policyState(func(s *keystate.State) { s.Key.Finalizers = nil }), true, "addFinalizer"},
			{"there", policyState(nil), false, ""},
		},
		"Revoked": {
			{"spec.revoked with a hash", policyState(func(s *keystate.State) { s.Key.Spec.Revoked = true }), true, "revoke"},
			{"spec.revoked, settled", policyState(func(s *keystate.State) {
				s.Key.Spec.Revoked = true
				s.Hash, s.Reveal, s.Reveals, s.Key.Status.RevealSecretName = nil, nil, nil, ""
			}), true, "none"},
			{"the record's revocation keeps the hash", policyState(func(s *keystate.State) {
				keysecret.SetRevoked(s.Hash, past.Time, switchboardv1alpha1.ReasonUnusedRevoked)
				s.Reveal, s.Reveals, s.Key.Status.RevealSecretName = nil, nil, ""
			}), true, "none"},
			{"a status saying revoked", policyState(func(s *keystate.State) { s.Key.Status.RevokedAt = &past }), false, ""},
		},
	}
	keystatetest.RunPolicies(t, Policies, p, tables, policyCase.unpack)
}
