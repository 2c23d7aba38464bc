// Package ratelimit enforces the per-key rate limits of APIKeys (spec.rateLimit) with GCRA, the
// generic cell rate algorithm, in one of two stores behind one interface: Memory (per replica,
// the default) and Redis (exact across replicas). A Limiter puts them together and falls back
// to memory for a request whenever Redis is slow or down.
//
// Why GCRA: a key's whole state is one number, its theoretical arrival time (TAT), so memory
// is O(1) per key and one Redis round trip reads and writes it atomically; the burst is exact
// (Burst requests at once from a rested key, never one more); and the budget comes back
// continuously, one request every Period/Requests, instead of all at once at a window's edge,
// so there is no double burst across a boundary as with fixed windows. The math here is the
// one github.com/go-redis/redis_rate runs in Redis, so both stores decide alike.
//
// A key may also have Credits, a number of requests per period of a calendar, decided with
// its rate in one step and exact across replicas with Redis; see Credits for how, and for what
// they do not do yet.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Bounds of a policy: the APIKey CRD's (api/v1alpha1), so that every policy the API server
// stores is one the server can enforce.
const (
	MinPeriod   = switchboardv1alpha1.RateLimitMinPeriod
	MaxPeriod   = switchboardv1alpha1.RateLimitMaxPeriod
	MaxRequests = switchboardv1alpha1.RateLimitMaxRequests
)

// Limit is a rate: Requests per Period on average, at most Burst at once. Burst is at most
// Requests: a rate with a larger burst is the same rate over a longer period (10 per second
// with bursts of 100 is 100 per 10 seconds), which keeps every TAT within MaxPeriod of now.
type Limit struct {
	Requests int64
	Period   time.Duration
	Burst    int64
}

// Validate checks l against the bounds above.
func (l Limit) Validate() error {
	switch {
	case l.Requests < 1 || l.Requests > MaxRequests:
		return fmt.Errorf("requests must be from 1 to %d, not %d", MaxRequests, l.Requests)
	case l.Period < MinPeriod || l.Period > MaxPeriod:
		return fmt.Errorf("period must be from %s to %s, not %s", MinPeriod, MaxPeriod, l.Period)
	case l.Period%time.Second != 0:
		return fmt.Errorf("period must be whole seconds, not %s", l.Period)
	case l.Burst < 1 || l.Burst > l.Requests:
		return fmt.Errorf("burst must be from 1 to requests (%d), not %d", l.Requests, l.Burst)
	}
	return nil
}

// interval is GCRA's emission interval: the time one request's worth of budget takes to come
// back. It is rounded down to the nanosecond, which makes a key at most one request per
// Period/1ns faster than asked (3 per second become 3.000000003): the exactness of the burst
// matters, not that.
func (l Limit) interval() int64 { return int64(l.Period) / l.Requests }

// burstOffset is how far ahead of now a key's TAT may be and still admit a request: Burst
// intervals, at most Period.
func (l Limit) burstOffset() int64 { return l.interval() * l.Burst }

// Result is the decision on one request.
type Result struct {
	// Allowed says whether the request may go on. A refused request takes nothing.
	Allowed bool
	// Remaining is how many more requests the key could make at once right now.
	Remaining int64
	// RetryAfter is, for a refused request, how long until one would be allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the key's budget is whole again (Burst remaining).
	ResetAfter time.Duration
	// Credits is the outcome of the key's credits, if it has any. When they refuse the
	// request, RetryAfter is the time to their refill.
	Credits CreditResult
}

// NextAfter is how long until the key regains one request: RetryAfter when refused; when
// allowed, the time until Remaining grows by one. It is what the RateLimit field's "t" says.
func (r Result) NextAfter(l Limit) time.Duration {
	if !r.Allowed {
		return max(r.RetryAfter, 0)
	}
	// The budget is whole at ResetAfter; each interval before it, one request fewer remains.
	missing := l.Burst - r.Remaining - 1
	return max(r.ResetAfter-time.Duration(missing*l.interval()), 0)
}

// decide runs GCRA for one request at now (unix nanoseconds) on a key whose TAT is tat (zero:
// a key never seen, or rested). It returns the new TAT, which is tat itself when refused.
func decide(tat, now int64, l Limit) (int64, Result) {
	t := l.interval()
	tat = max(tat, now)
	next := tat + t
	allowAt := next - l.burstOffset()
	if diff := now - allowAt; diff >= 0 {
		return next, Result{Allowed: true, Remaining: diff / t, ResetAfter: time.Duration(next - now)}
	}
	return tat, Result{RetryAfter: time.Duration(allowAt - now), ResetAfter: time.Duration(tat - now)}
}

// Policy is one APIKey's rate limit as the request path needs it, built once when the APIKey
// changes. It is never modified once built.
type Policy struct {
	Limit
	// ID names the key's budget in the store: the APIKey's UID, so that a rotation keeps the
	// budget (a new key does not buy a fresh one) and two APIKeys never share one, followed by
	// the limit, so that a changed limit starts with a whole budget of its own. A budget spent
	// under the old limit would otherwise hold the key back by as much as the old period (a
	// day), while RateLimit-Policy already announced the new one; only someone who may edit
	// the APIKey, and so could drop its limit, can change it.
	ID string
	// Credits, when not nil, are the key's credits (NewCreditPolicy).
	Credits *Credits

	// creditsID prefixes the names of the key's credit counts.
	creditsID string
	// pooled says creditsID is a credit pool's, which other keys' policies count on too
	// (NewPoolCreditPolicy).
	pooled bool
	// rateless says the key has credits and no rate of its own (NewCreditPolicy).
	rateless bool
	// policyField is the RateLimit-Policy field value, shared by every response of the key.
	policyField []string
}

// NewPolicy builds the policy of the APIKey with UID id.
func NewPolicy(id string, l Limit) (*Policy, error) {
	if id == "" {
		return nil, errors.New("a policy needs the ID of its key")
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Policy{Limit: l, ID: budgetID(id, l), policyField: []string{formatPolicy(l)}}, nil
}

// budgetID is the name of the budget of the key with UID id under l: "<uid>/<requests>/<period
// in seconds>/<burst>".
func budgetID(id string, l Limit) string {
	return id + "/" + strconv.FormatInt(l.Requests, 10) + "/" + strconv.FormatInt(int64(l.Period/time.Second), 10) + "/" + strconv.FormatInt(l.Burst, 10)
}

// Store decides requests against the budgets it keeps. Memory and Redis are the two stores.
type Store interface {
	// Allow decides one request of p's key now, taking one request from its budget if allowed.
	Allow(ctx context.Context, p *Policy) (Result, error)
	// Spent reads how many of p's credits period has spent, spending none.
	Spent(ctx context.Context, p *Policy, period Period) (int64, error)
}
