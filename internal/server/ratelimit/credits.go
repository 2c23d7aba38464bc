package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Credits are how many requests a key may make per period of a refill calendar (a plan's
// "100,000 requests a month"), beside its rate. One Allow decides both: a request needs a rate token
// and its cost in credits, and a request refused by either takes nothing from the other.
//
// How they are exact. Each key (or pool: Counter) has one credit record in its store: the
// schedule's kind, the current period's index, what it spent and what it carried in from the
// periods before (rollover), the same for the previous period, the Interval anchor, and what
// each grant spent. The caller passes the period's index from its clock; when it is past the
// record's, the record moves on by itself (Reset: the whole amount again; Add: plus the
// unspent credits of each period passed, up to Cap), so a refill needs no job, no invalidation
// and no cache. A request decided against the previous period after the record moved on (a
// replica whose clock is behind) is counted against the previous period's own numbers, never
// the new one's; one older than that is refused. In memory the rate and the credits are decided
// under the key's shard lock; in Redis by one script per request, atomic in Redis, that runs
// the GCRA and the credits together (no extra round trip), so N replicas on one Redis admit
// exactly the allowance per period. A replica's clock chooses the period (Redis's clock runs the
// GCRA, as without credits): around a boundary, a request may count in the period its replica's
// clock says, off by that clock's skew, still exactly once. When Redis fails, a key with credits
// is refused (CreditResult.Unavailable) instead of being decided in memory, where each replica
// would count its own credits.
//
// An APIKey's spec.credits are read into one (internal/server/keyindex.Credits).
type Credits struct {
	// Amount is how many credits each period gives.
	Amount   int64
	Schedule Schedule
	// Cap, when above Amount, makes unspent credits roll over (Add): a period's allowance is
	// min(Cap, Amount + what the previous period left), idle periods accumulating up to Cap.
	// Zero (or Amount) is Reset: every period starts with Amount.
	Cap int64
	// Grants are one-off credits spent after the period's, earliest-expiring first.
	Grants []Grant
	// Counter names the credit record: the APIKey's UID when empty; a pool's UID makes its
	// keys share one (NewPoolCreditPolicy).
	Counter string
}

// Grant is a one-off amount of credits with an ID: the store counts what each grant spent under
// its ID, so a grant applied twice is counted once, and a grant removed is gone with what it
// had left (added again later, it is a new grant).
type Grant struct {
	ID     string
	Amount int64
	// ExpiresAt is when the grant's credits are gone; zero for never.
	ExpiresAt time.Time
}

// Bounds of credits.
const (
	// MaxCredits bounds Amount, Cap and a grant's Amount, as the APIKey CRD does.
	MaxCredits = switchboardv1alpha1.CreditsMaxAmount
	// MaxGrants bounds Grants.
	MaxGrants = 8
	// MaxCost bounds what one request may cost; Allow holds a cost to 0..MaxCost.
	MaxCost = switchboardv1alpha1.CreditsMaxCost
)

const (
	// creditsSlack is how long a record outlives its period: longer than any replica's clock
	// is off, so that a replica still in the period counts on it.
	creditsSlack = time.Hour
	// creditsKeepMax bounds how long a rolling-over record is kept for its idle accumulation:
	// a key unused for longer starts again with Amount.
	creditsKeepMax = 2 * 366 * 24 * time.Hour
)

// CreditResult is the credits' part of a Result; zero for a key without credits.
type CreditResult struct {
	// Exhausted says the request was refused because fewer credits than its cost remain.
	Exhausted bool
	// Unavailable says the request was refused because Redis, which keeps the credits, failed.
	Unavailable bool
	// Remaining is how many credits the period (and the grants) have left after this request.
	Remaining int64
	// RefillAt is the end of the period, when the credits are whole again, and RefillAfter
	// how long until then.
	RefillAt    time.Time
	RefillAfter time.Duration
	// Window is how long the period lasts (a month, a 23-hour day across a DST change).
	Window time.Duration
	// Charged is what an admitted request took, for Limiter.Refund.
	Charged Charge
}

// Charge is what one admitted request took from a key's credits, and from where.
type Charge struct {
	// Period is the index of the period charged, FromPeriod what it took from it.
	Period, FromPeriod int64
	// FromGrants is what it took from each of the policy's Grants, nil for none.
	FromGrants *[MaxGrants]int64
}

// Total is everything c took.
func (c Charge) Total() int64 {
	n := c.FromPeriod
	if c.FromGrants != nil {
		for _, g := range c.FromGrants {
			n += g
		}
	}
	return n
}

// NewCreditPolicy builds the policy of the APIKey with UID id that has the rate l and the
// credits c. A zero l is no rate: the key is held to its credits alone (Policy.HasRate).
func NewCreditPolicy(id string, l Limit, c Credits) (*Policy, error) {
	rateless := l == Limit{}
	if rateless {
		l = creditsOnlyRate
	}
	p, err := NewPolicy(id, l)
	if err != nil {
		return nil, err
	}
	p.rateless = rateless
	switch {
	case c.Amount < 1 || c.Amount > MaxCredits:
		return nil, fmt.Errorf("credits must be from 1 to %d, not %d", int64(MaxCredits), c.Amount)
	case c.Schedule.Zone == nil:
		return nil, errors.New("credits need a schedule")
	case c.Cap != 0 && (c.Cap < c.Amount || c.Cap > MaxCredits):
		return nil, fmt.Errorf("the cap of credits must be from their amount (%d) to %d, not %d", c.Amount, int64(MaxCredits), c.Cap)
	case len(c.Grants) > MaxGrants:
		return nil, fmt.Errorf("at most %d grants, not %d", MaxGrants, len(c.Grants))
	}
	c.Cap = max(c.Cap, c.Amount)
	c.Grants = slices.Clone(c.Grants)
	for i, g := range c.Grants {
		if g.ID == "" || g.Amount < 1 || g.Amount > MaxCredits || slices.ContainsFunc(c.Grants[:i], func(o Grant) bool { return o.ID == g.ID }) {
			return nil, fmt.Errorf("grant %q: a grant needs an ID of its own and an amount from 1 to %d, not %d", g.ID, int64(MaxCredits), g.Amount)
		}
	}
	// Earliest-expiring first, those that never expire last, by ID among equals: the order
	// they are spent in.
	slices.SortFunc(c.Grants, func(a, b Grant) int {
		switch {
		case a.ExpiresAt.IsZero() != b.ExpiresAt.IsZero():
			if a.ExpiresAt.IsZero() {
				return 1
			}
			return -1
		case !a.ExpiresAt.Equal(b.ExpiresAt):
			return a.ExpiresAt.Compare(b.ExpiresAt)
		}
		return strings.Compare(a.ID, b.ID)
	})
	if c.Counter == "" {
		c.Counter = id
	}
	p.Credits = &c
	// The counter alone, not the rate: a changed rate keeps the record. A changed Amount
	// keeps it too (it counts credits spent), so an upgraded plan gets the difference.
	p.creditsID = c.Counter + "/credits"
	p.creditsKind = c.Schedule.Kind()
	return p, nil
}

// withCredits completes res, the rate's decision on a request of p's key at now in period,
// with its credits: whether enough remained for it, and what remains (after it when both
// admit). A request the rate admits but the credits refuse takes no rate token: the caller
// keeps the TAT, and Remaining and ResetAfter say so.
func (p *Policy) withCredits(res Result, enough bool, remaining int64, period Period, now time.Time) Result {
	res.Credits = CreditResult{Remaining: remaining, RefillAt: period.End,
		RefillAfter: period.End.Sub(now), Window: period.End.Sub(period.Start)}
	if res.Allowed && !enough {
		res.Allowed = false
		res.Credits.Exhausted = true
		res.RetryAfter = res.Credits.RefillAfter
		res.Remaining++
		res.ResetAfter -= time.Duration(p.interval())
	}
	return res
}

// NewPoolCreditPolicy is NewCreditPolicy for the key with UID id that spends the credits c of a
// pool shared with other keys, whose UID is pool: its rate stays its own, its credits are
// counted on the pool's record (Counter), so every key of the pool spends one count, in the
// same step as its rate. The UID, never the name: a pool deleted and created again starts afresh.
func NewPoolCreditPolicy(id, pool string, l Limit, c Credits) (*Policy, error) {
	if pool == "" {
		return nil, errors.New("a pool's credits need the ID of the pool")
	}
	c.Counter = pool
	return NewCreditPolicy(id, l, c)
}

// creditsOnlyRate is the rate a key with credits and no rate is decided with, so that one step
// decides both as for every other key: a million requests at once, refilled every second, which
// no client reaches through one server. It is never announced (Policy.HasRate).
var creditsOnlyRate = Limit{Requests: MaxRequests, Period: MinPeriod, Burst: MaxRequests}

// HasRate says whether p's key has a rate of its own, which its RateLimit fields and gateways
// announce; false for a key held to its credits alone.
func (p *Policy) HasRate() bool { return !p.rateless }

// refusedByRate says the rate refused the request (the credits may have refused it too).
func (r Result) refusedByRate() bool {
	return !r.Allowed && !r.Credits.Exhausted && !r.Credits.Unavailable
}

// Balance is a key's credits in the current period.
type Balance struct {
	Period Period
	// Used is what the period spent; Allowance what it gives (Amount, more with a rollover);
	// Granted what the grants have left; Remaining what may still be spent: Allowance - Used +
	// Granted.
	Used, Allowance, Granted, Remaining int64
}

// Balance reads the credits of p's key in the current period without spending any, from Redis
// when the limiter has it (one HMGET, exact across replicas), else from this replica's memory.
// For status writes (internal/server/lastused), never on a request's path; false for a key
// without credits.
func (l *Limiter) Balance(ctx context.Context, p *Policy) (Balance, bool, error) {
	if p == nil || p.Credits == nil {
		return Balance{}, false, nil
	}
	var store Store = l.memory
	if l.remote != nil {
		store = l.remote
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	rec, err := store.record(ctx, p)
	if err != nil {
		return Balance{}, false, err
	}
	return p.balance(rec, l.clock.Now()), true, nil
}
