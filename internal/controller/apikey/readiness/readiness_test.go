package readiness

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/issuing"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate/keystatetest"
)

// publish, revokeUnused and revoke stand for the actions of those names (issuing, lifecycle,
// objectlife) in TestFindingsOf's table: FindingsOf reads no action but an issue.
type (
	publish      struct{ keystate.Action }
	revokeUnused struct{ keystate.Action }
	revoke       struct{ keystate.Action }
)

// TestFindingsOf: the status reports the observation, with what the action found in its place.
func TestFindingsOf(t *testing.T) {
	at := keystatetest.Now.Add(-time.Hour)
	observed := &keystate.Observation{Hash: keystate.HashFound, Conflict: "someone else's", Reveal: switchboardv1alpha1.ReasonRevealClaimed, Life: keystate.Life{Known: true}}
	tests := []struct {
		name string
		obs  *keystate.Observation
		d    keystate.Decision
		out  keystate.Outcome
		want Findings
	}{
		{"nothing done: the observation", observed, keystate.Decision{}, keystate.Outcome{},
			Findings{Hash: keystate.HashFound, Conflict: "someone else's", Reveal: switchboardv1alpha1.ReasonRevealClaimed, Life: keystate.Life{Known: true}}},
		{"an issue: its own conflict and reveal, no observed hash", observed, keystate.Decision{Do: issuing.Issue{}}, keystate.Outcome{Issuing: 3, Issued: true, Published: true, Reveal: switchboardv1alpha1.ReasonDelivered},
			Findings{Issuing: 3, Issued: true, Reveal: switchboardv1alpha1.ReasonDelivered, Life: keystate.Life{Known: true}}},
		{"a renewal says so", observed, keystate.Decision{Do: issuing.Issue{Renewal: true}}, keystate.Outcome{Issuing: 3, Conflict: "taken"},
			Findings{Issuing: 3, Conflict: "taken", Reveal: switchboardv1alpha1.ReasonRevealClaimed, Life: keystate.Life{Known: true, Renewal: true}}},
		{"a publication found the hash", &keystate.Observation{Hash: keystate.HashUnknown}, keystate.Decision{Do: publish{}}, keystate.Outcome{Published: true, HashFound: true, Restored: true},
			Findings{Hash: keystate.HashFound, Restored: true}},
		{"a revocation for want of use", observed, keystate.Decision{Do: revokeUnused{}}, keystate.Outcome{RevokedAt: at},
			Findings{Revoked: true, RevokedAt: at, Hash: keystate.HashFound, Conflict: "someone else's", Reveal: switchboardv1alpha1.ReasonRevealClaimed, Life: keystate.Life{Known: true}}},
		{"revoked as observed", &keystate.Observation{Revoked: true, RevokedAt: at}, keystate.Decision{Do: revoke{}}, keystate.Outcome{Reveal: switchboardv1alpha1.ReasonRevoked},
			Findings{Revoked: true, RevokedAt: at, Reveal: switchboardv1alpha1.ReasonRevoked}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FindingsOf(tt.obs, tt.d, tt.out, tt.obs.Life); got != tt.want {
				t.Fatalf("FindingsOf = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestRenewalLimitedConditions: a key whose renewal the platform's minimum held back says so
// (RenewalLimited=True with the reason), and, ended before that renewal, Ready says until when
// it is refused rather than asking for a rotation; once renewals are within the minimum the
// condition goes.
func TestRenewalLimitedConditions(t *testing.T) {
	end, renewAt := keystatetest.Now.Add(-time.Minute), keystatetest.Now.Add(2*time.Minute)
	key := keystatetest.Key(2, false)
	found := Findings{Hash: keystate.HashFound, Life: keystate.Life{Known: true, Ended: true, NotAfter: end, RenewAt: renewAt, LastActivity: keystatetest.Now,
		Limited: "lifetime 2m0s with renewBeforePercentage 99 (1m58.8s) renews the key every 1.2s; this platform renews a key at most every 5m0s"}}
	SetConditions(key, &found, "sys")
	ready := meta.FindStatusCondition(key.Status.Conditions, switchboardv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != switchboardv1alpha1.ReasonExpired ||
		!strings.Contains(ready.Message, "refused until its renewal at "+renewAt.UTC().Format(time.RFC3339)) {
		t.Fatalf("Ready: %+v", ready)
	}
	limited := meta.FindStatusCondition(key.Status.Conditions, switchboardv1alpha1.ConditionRenewalLimited)
	if limited == nil || limited.Status != metav1.ConditionTrue || limited.Reason != switchboardv1alpha1.ReasonRenewsTooOften || limited.Message != found.Life.Limited {
		t.Fatalf("RenewalLimited: %+v", limited)
	}
	found.Life.Limited, found.Life.Ended = "", false
	SetConditions(key, &found, "sys")
	if c := meta.FindStatusCondition(key.Status.Conditions, switchboardv1alpha1.ConditionRenewalLimited); c != nil {
		t.Fatalf("RenewalLimited stays once renewals are within the minimum: %+v", c)
	}
}
