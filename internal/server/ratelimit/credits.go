package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Credits are how many requests a key may make per period of a refill calendar (a plan's
// "100,000 requests a month"), beside its rate. One Allow decides both: a request needs a rate token
// and a credit, and a request refused by either takes nothing from the other.
//
// How they are exact. A period's count is named by the key and the period's ID, so a refill is
// only the calendar moving on to a name nobody has counted under yet: no job, no invalidation,
// no cache. In memory the rate and the count are decided under the key's shard lock; in Redis
// by one script per request, atomic in Redis, that runs the GCRA and the count together (no
// extra round trip), so N replicas on one Redis admit exactly Amount per period. The count
// expires at the period's end (plus creditsSlack), and a decrement that arrives late, from a
// replica still in the previous period, lands on the previous period's count, never on the new
// one. A replica's clock chooses the period (Redis's clock runs the GCRA, as without credits):
// around a boundary, a request may count in the period its replica's clock says, off by that
// clock's skew, still exactly once. When Redis fails, a key with credits is refused
// (CreditResult.Unavailable) instead of being decided in memory, where each replica would
// count its own credits.
//
// An APIKey's spec.credits are read into one (internal/server/keyindex). What they do not do
// yet: the rollover is Reset only (Add up to a cap needs the previous
// periods' balances); a request costs one credit; there are no grants or fixed
// intervals from a key's first use.
type Credits struct {
	// Amount is how many requests each period admits.
	Amount   int64
	Schedule Schedule
}

// MaxCredits bounds Amount, as the APIKey CRD bounds credits.amount.
const MaxCredits = switchboardv1alpha1.CreditsMaxAmount

// creditsSlack is how long a period's count outlives the period in Redis: longer than any
// replica's clock is off, so that a replica still in the period counts on its count.
const creditsSlack = time.Hour

// CreditResult is the credits' part of a Result; zero for a key without credits.
type CreditResult struct {
	// Exhausted says the request was refused because its period's credits are spent.
	Exhausted bool
	// Unavailable says the request was refused because Redis, which keeps the credits, failed.
	Unavailable bool
	// Remaining is how many credits the period has left after this request.
	Remaining int64
	// RefillAt is the end of the period, when the credits are whole again, and RefillAfter
	// how long until then.
	RefillAt    time.Time
	RefillAfter time.Duration
	// Window is how long the period lasts (a month, a 23-hour day across a DST change).
	Window time.Duration
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
	}
	p.Credits = &c
	// The UID alone, not the rate: a changed rate keeps the period's count. A changed Amount
	// keeps it too (the count is of credits spent), so an upgraded plan gets the difference.
	p.creditsID = id + "/credits/"
	return p, nil
}

// NewPoolCreditPolicy is NewCreditPolicy for the key with UID id that spends the credits c of a
// pool shared with other keys, whose UID is pool: its rate stays its own, its credits are
// counted under the pool's UID, so every key of the pool spends one count, in the same step as
// its rate. The UID, never the name: a pool deleted and created again starts afresh.
func NewPoolCreditPolicy(id, pool string, l Limit, c Credits) (*Policy, error) {
	if pool == "" {
		return nil, errors.New("a pool's credits need the ID of the pool")
	}
	p, err := NewCreditPolicy(id, l, c)
	if err != nil {
		return nil, err
	}
	p.creditsID, p.pooled = pool+"/credits/", true
	return p, nil
}

// shardID chooses the memory shard that decides p's requests: the key's budget, or for a key
// of a pool the pool's count, so that every key of the pool is decided under one lock.
func (p *Policy) shardID() string {
	if p.pooled {
		return p.creditsID
	}
	return p.ID
}

// creditsOnlyRate is the rate a key with credits and no rate is decided with, so that one step
// decides both as for every other key: a million requests at once, refilled every second, which
// no client reaches through one server. It is never announced (Policy.HasRate).
var creditsOnlyRate = Limit{Requests: MaxRequests, Period: MinPeriod, Burst: MaxRequests}

// HasRate says whether p's key has a rate of its own, which its RateLimit fields and gateways
// announce; false for a key held to its credits alone.
func (p *Policy) HasRate() bool { return !p.rateless }

// creditKey names the count of p's credits spent in period.
func (p *Policy) creditKey(period Period) string { return p.creditsID + period.ID }

// withCredits completes res, the rate's decision on a request of p's key at now in period,
// with its credits, spent of which had been spent before the request. A request the rate
// admits but the credits refuse takes no rate token: the caller keeps the TAT, and Remaining
// and ResetAfter say so.
func (p *Policy) withCredits(res Result, spent int64, period Period, now time.Time) Result {
	res.Credits = CreditResult{Remaining: max(p.Credits.Amount-spent, 0), RefillAt: period.End,
		RefillAfter: period.End.Sub(now), Window: period.End.Sub(period.Start)}
	switch {
	case !res.Allowed:
	case spent >= p.Credits.Amount:
		res.Allowed = false
		res.Credits.Exhausted = true
		res.RetryAfter = res.Credits.RefillAfter
		res.Remaining++
		res.ResetAfter -= time.Duration(p.interval())
	default:
		res.Credits.Remaining--
	}
	return res
}

// refusedByRate says the rate refused the request (the credits may have refused it too).
func (r Result) refusedByRate() bool {
	return !r.Allowed && !r.Credits.Exhausted && !r.Credits.Unavailable
}

// Balance is a key's credits in the current period, read without spending any.
type Balance struct {
	Period          Period
	Used, Remaining int64
}

// Balance reads the credits of p's key in the period of now without spending one, from Redis
// when the limiter has it (one GET, exact across replicas), else from this replica's memory.
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
	period := p.Credits.Schedule.Period(l.clock.Now())
	spent, err := store.Spent(ctx, p, period)
	if err != nil {
		return Balance{}, false, err
	}
	used := min(spent, p.Credits.Amount)
	return Balance{Period: period, Used: used, Remaining: p.Credits.Amount - used}, true, nil
}
