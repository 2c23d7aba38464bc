package apikey

import (
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestPlanHeldLeakReplacement: while a leaked key's replacement is held, nothing is issued on
// its account, and the wake-up is its end; a rotation asked by hand meanwhile is carried out
// (the chain goes on past Leaked); at its end the replacement is issued.
func TestPlanHeldLeakReplacement(t *testing.T) {
	p := keystate.Params{RevealTTL: planTTL, ExpiryWarning: 7 * 24 * time.Hour, UnusedAfter: 90 * 24 * time.Hour, MinRenewal: renewalinterval.Default}
	held := func(now time.Time, f func(s *keystate.State)) *keystate.State {
		s := deliveredPolicyState(func(s *keystate.State) {
			keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: string(s.Hash.Data[keysecret.DataHash]), Generation: 2, At: planNow,
				ReplaceAfter: planNow.Add(3 * time.Minute), LastReplacement: planNow.Add(3 * time.Minute)})
			s.Now = now
		})
		if f != nil {
			f(s)
		}
		return s
	}
	obs, d := plan(held(planNow, nil), p)
	if d.Policy == "Leaked" || d.Policy == "KeyToIssue" || obs.Wake.After != 3*time.Minute {
		t.Fatalf("held: policy %q (%s), wake after %s; want no issue, a wake-up in 3m", d.Policy, d.Why, obs.Wake.After)
	}
	_, d = plan(held(planNow, func(s *keystate.State) { s.Key.Spec.Rotation.RequestedAt = "by hand" }), p)
	if d.Policy != "KeyToIssue" {
		t.Fatalf("a rotation asked while held: policy %q (%s), want KeyToIssue", d.Policy, d.Why)
	}
	_, d = plan(held(planNow.Add(3*time.Minute), nil), p)
	// The leak's action replaces the key exactly when it issues a generation (leak.leaked).
	if d.Policy != "Leaked" || d.Do == nil || reflect.TypeOf(d.Do).Name() != "refuseLeaked" || d.Gen != 3 {
		t.Fatalf("at the hold's end: policy %q (%+v), want Leaked replacing with generation 3", d.Policy, d)
	}
}
