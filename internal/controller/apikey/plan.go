package apikey

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/switchboard-dev/switchboard/internal/controller/apikey/grace"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/issuing"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/leak"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/lifecycle"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/objectlife"
)

// Plan: the second step of a reconcile, and a pure function of what was observed
// (keystate.State). It reads the facts the status reports (each concern its own) and asks the
// concerns' chains of named policies, in order, what to do; the first policy that decides ends
// the chain, and says why.

// policies are the concerns' chains in the order they are asked: the object's own life and
// revocation; a leak, refused and replaced before anything else is done; the key to issue or
// deliver; its life; then upkeep: its record, its old key's grace, its reveal. TestPolicies in
// each concern has a table for each of its policies, TestPlan the chain as a whole.
var policies = slices.Concat(
	objectlife.Policies,
	leak.Policies,
	issuing.Policies,
	lifecycle.Policies,
	issuing.RecordPolicies,
	grace.Policies,
	issuing.RevealPolicies,
)

// observers read each concern's facts, after those they all share (keystate.Observe).
var observers = []keystate.Observer{lifecycle.Observe, grace.Observe, leak.Observe, issuing.Observe}

// plan reads the facts of s and asks the chain of policies what to do.
func plan(s *keystate.State, p keystate.Params) (*keystate.Observation, keystate.Decision) {
	obs := keystate.Observe(s, p, observers...)
	return obs, policies.Evaluate(keystate.Input{S: s, Obs: obs, P: p})
}

// Confirm: the third step of a reconcile. The cache may be behind the API server, above all
// behind the operator's own last writes; before an action writes on a decision the cache could
// get wrong, confirm reads from the API server what that decision rests on (each action says,
// as a keystate.Confirmer) and plans again. A check action becomes the decision the confirmed
// state asks for; any other must come out the same (policy and generation), or the reconcile is
// stale: it writes nothing and runs again once the cache has caught up.

// maxChecks bounds the checks one reconcile confirms (hash, reveal, delivery: one each).
const maxChecks = 3

// confirm returns the decision to act on, reading what d rests on into s (and the facts of s as
// read). stale says the cache disagreed with the API server on d.
func confirm(ctx context.Context, env *keystate.Env, s *keystate.State, p keystate.Params, obs *keystate.Observation, d keystate.Decision) (*keystate.Observation, keystate.Decision, bool, error) {
	for range maxChecks + 1 {
		c, ok := d.Do.(keystate.Confirmer)
		if !ok {
			return obs, d, false, nil
		}
		read, err := c.Confirm(ctx, env, s)
		if errors.Is(err, keystate.ErrStale) {
			return obs, d, true, nil
		}
		if err != nil || !read {
			return obs, d, false, err
		}
		againObs, again := plan(s, p)
		if _, isCheck := d.Do.(keystate.Check); !isCheck {
			if again.Policy != d.Policy || again.Gen != d.Gen {
				return obs, d, true, nil
			}
			return againObs, again, false, nil
		}
		// A check resolved: what the resolved decision rests on is confirmed in turn.
		obs, d = againObs, again
	}
	return obs, d, false, fmt.Errorf("APIKey %s: the checks did not settle in %d reads", s.Name, maxChecks)
}
