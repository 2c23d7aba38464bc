package ratelimit

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

// Names of the stores, as metrics label them.
const (
	StoreMemory = "memory"
	StoreRedis  = "redis"
)

const (
	// DefaultRedisTimeout bounds one decision in Redis. A same-zone Redis answers in well under
	// a millisecond; past this, the request is decided in memory instead of waiting.
	DefaultRedisTimeout = 50 * time.Millisecond
	// RemoteRetry is how long after a failed decision in Redis the next ones skip Redis and go
	// straight to memory: a Redis that hangs then costs one timeout a second, not one per request.
	RemoteRetry = time.Second
	// logEvery bounds the log lines about an unavailable Redis to one per interval.
	logEvery = 30 * time.Second
	// sweepEvery is how often Run forgets rested keys.
	sweepEvery = time.Minute
)

// Limiter decides requests of rate-limited keys: in Redis when it has one, else in memory.
//
// When Redis fails (an error, or no answer within the timeout) the request is decided in memory
// instead, and so are the next ones for RemoteRetry: availability of the API comes before the
// exactness of a limit. The alternatives are worse: refusing (fail closed) would turn a Redis
// outage into an outage of every limited key, and admitting without any limit (fail open) would
// drop the limits exactly when something is already wrong. In memory, each replica enforces
// the limit on its own, as it does without Redis, so a key may get up to N times its limit
// across N replicas until Redis answers again. Every such request is counted
// (switchboard_api_rate_limit_fallbacks_total), every failure too
// (switchboard_api_rate_limit_store_errors_total), and a log line says so at most every 30 s.
// Keys with credits are the exception: by default (CreditsRefuse) they are refused
// (CreditResult.Unavailable) until Redis answers, since in memory each replica would count them
// again from zero; with CreditsCountInMemory they are decided in memory like the rate (see
// CreditsFailureMode for what that costs).
type Limiter struct {
	memory  *Memory
	remote  Store
	timeout time.Duration
	clock   clock.PassiveClock
	log     logr.Logger
	// creditsOnFailure is what a key with credits gets while Redis fails.
	creditsOnFailure CreditsFailureMode
	// creditReplicas is how many replicas share a key's credits when memory decides them
	// (CreditShare); 1 gives each replica the whole amount.
	creditReplicas int64

	// retryRemoteAt (unix nanoseconds) is when Redis may be tried again after a failure.
	retryRemoteAt atomic.Int64
	// degraded is true from a failure of Redis until it answers again.
	degraded atomic.Bool
	// loggedAt (unix nanoseconds) is when the last line about Redis was written, and
	// sinceLog how many requests were decided in memory since.
	loggedAt atomic.Int64
	sinceLog atomic.Int64
}

// Options configure a Limiter.
type Options struct {
	// Remote is the shared store (Redis); nil decides every request in memory.
	Remote Store
	// Timeout bounds a decision in Remote (DefaultRedisTimeout when zero).
	Timeout time.Duration
	// Clock is the time of the memory store and of the retry; the real clock when nil.
	Clock clock.PassiveClock
	// Logger receives the lines about an unavailable Remote.
	Logger logr.Logger
	// CreditsOnRedisFailure is what a key with credits gets while Remote fails (CreditsRefuse
	// when empty).
	CreditsOnRedisFailure CreditsFailureMode
	// CreditReplicas is how many replicas at most decide keys' credits in their own memory
	// (without Redis, or while it fails with CreditsCountInMemory): each admits its CreditShare
	// of a period's amount. 1 when zero: the whole amount on every replica.
	CreditReplicas int
}

// CreditsFailureMode is what a key with credits gets while Redis, which keeps them exact across
// replicas, fails.
type CreditsFailureMode string

const (
	// CreditsRefuse refuses the key's requests (503 NOT_READY) until Redis answers: nothing is
	// ever sold twice, and a Redis outage is an outage of every key with credits. The default.
	CreditsRefuse CreditsFailureMode = "Refuse"
	// CreditsCountInMemory decides them in the replica's memory, each replica counting from
	// what it saw itself (its CreditShare of a period, from zero the first time), as without
	// Redis. The keys keep working; the cost is an overshoot: with N replicas running, up to
	// N × CreditShare credits per period the outage touches beyond what Redis counted (N × the
	// amount when CreditReplicas is 1). The memory counts never merge back into Redis: once it
	// answers, its count goes on from where it stopped.
	CreditsCountInMemory CreditsFailureMode = "CountInMemory"
)

// CreditShare is what one of replicas replicas admits of amount credits per period when it
// decides them in its own memory: amount / replicas rounded down, so that replicas replicas
// together never admit more than amount, and at least 1, so that a key with fewer credits than
// replicas is not refused everywhere (there, up to replicas − amount more are admitted).
func CreditShare(amount int64, replicas int) int64 {
	if replicas <= 1 {
		return amount
	}
	return max(amount/int64(replicas), 1)
}

// New returns a Limiter.
func New(o Options) *Limiter {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultRedisTimeout
	}
	if o.CreditsOnRedisFailure == "" {
		o.CreditsOnRedisFailure = CreditsRefuse
	}
	return &Limiter{memory: NewMemory(o.Clock), remote: o.Remote, timeout: o.Timeout, clock: o.Clock, log: o.Logger,
		creditsOnFailure: o.CreditsOnRedisFailure, creditReplicas: int64(max(o.CreditReplicas, 1))}
}

// Decision is a Result and where it was decided.
type Decision struct {
	Result
	// Store is the store that decided: StoreMemory or StoreRedis.
	Store string
	// Degraded says that Redis was configured but could not decide, so memory did.
	Degraded bool
}

// Allow decides one request of p's key that costs cost credits, if the key has credits (held to
// 0..MaxCost: a request costing 0 is free, admitted by the rate alone even with no credits left;
// a key without credits ignores it, and a request takes one rate token whatever its cost). It
// never fails: whatever happens to Redis, memory decides.
func (l *Limiter) Allow(ctx context.Context, p *Policy, cost int64) Decision {
	cost = min(max(cost, 0), MaxCost)
	if l.remote == nil {
		return l.inMemory(ctx, p, cost, false)
	}
	now := l.clock.Now().UnixNano()
	if now < l.retryRemoteAt.Load() {
		return l.inMemory(ctx, p, cost, true)
	}
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	res, err := l.remote.Allow(rctx, p, cost)
	cancel()
	if err == nil {
		if l.degraded.Load() && l.degraded.CompareAndSwap(true, false) {
			l.log.Info("the rate-limit Redis answers again; limits are exact across replicas again",
				"decidedInMemory", l.sinceLog.Swap(0))
		}
		if res.refusedByRate() {
			limitedRedis.Inc()
		}
		return Decision{Result: res, Store: StoreRedis}
	}
	if ctx.Err() != nil {
		// The client went away: no answer is needed, and Redis is not to blame.
		return l.inMemory(ctx, p, cost, true)
	}
	l.remoteFailed(err, now)
	return l.inMemory(ctx, p, cost, true)
}

// Refund gives back to p's key the credits d, an admitted decision of Allow, charged, to the
// period and grants it charged (nothing once the record has moved two periods on): for a
// request charged on success that failed. One script run in Redis, bounded by the timeout;
// nothing for a key without credits or a decision that charged none.
func (l *Limiter) Refund(ctx context.Context, p *Policy, d Decision) error {
	if p == nil || p.Credits == nil || !d.Allowed || d.Credits.Charged.Total() == 0 {
		return nil
	}
	if d.Store == StoreMemory {
		return l.memory.Refund(ctx, l.shared(p), d.Credits.Charged)
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return l.remote.Refund(ctx, p, d.Credits.Charged)
}

func (l *Limiter) inMemory(ctx context.Context, p *Policy, cost int64, degraded bool) Decision {
	if p.Credits != nil {
		if degraded && l.creditsOnFailure != CreditsCountInMemory {
			// In memory, each replica would count the credits again from zero: refused rather
			// than sold twice.
			creditsRefused.Inc()
			return Decision{Result: Result{RetryAfter: RemoteRetry, Credits: CreditResult{Unavailable: true}}, Store: StoreRedis, Degraded: true}
		}
		if degraded {
			creditFallbacks.Inc()
		}
		p = l.shared(p)
	}
	res, _ := l.memory.Allow(ctx, p, cost)
	if degraded {
		fallbacks.Inc()
		l.sinceLog.Add(1)
	}
	if res.refusedByRate() {
		limitedMemory.Inc()
	}
	return Decision{Result: res, Store: StoreMemory, Degraded: degraded}
}

// shared is p with this replica's CreditShare of its credits, p itself when the replica has
// them all. The copy lives for one decision and names the same counts: a replica's count is one,
// whatever share it is held to.
func (l *Limiter) shared(p *Policy) *Policy {
	if l.creditReplicas == 1 {
		return p
	}
	n := int(l.creditReplicas)
	q, c := *p, *p.Credits
	c.Amount = CreditShare(c.Amount, n)
	if c.Cap > 0 {
		c.Cap = CreditShare(c.Cap, n)
	}
	if len(c.Grants) > 0 {
		c.Grants = append([]Grant(nil), c.Grants...)
		for i := range c.Grants {
			c.Grants[i].Amount = CreditShare(c.Grants[i].Amount, n)
		}
	}
	q.Credits = &c
	return &q
}

func (l *Limiter) remoteFailed(err error, now int64) {
	var netErr net.Error
	// Waiting for a connection from a full pool is Redis being too slow too.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) || errors.As(err, &netErr) && netErr.Timeout() {
		storeTimeouts.Inc()
	} else {
		storeErrors.Inc()
	}
	l.retryRemoteAt.Store(now + int64(RemoteRetry))
	l.degraded.Store(true)
	last := l.loggedAt.Load()
	if now-last >= int64(logEvery) && l.loggedAt.CompareAndSwap(last, now) {
		l.log.Error(err, "the rate-limit Redis did not answer; deciding in memory, each replica on its own, until it does",
			"timeout", l.timeout, "decidedInMemorySinceLastLine", l.sinceLog.Swap(0), "creditsOnRedisFailure", l.creditsOnFailure)
	}
}

// Run forgets rested keys of the memory store every minute until ctx ends, then closes Redis.
func (l *Limiter) Run(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if c, ok := l.remote.(io.Closer); ok {
				_ = c.Close()
			}
			return
		case <-t.C:
			l.memory.Sweep()
		}
	}
}

// Degraded reports whether Redis is configured and failed its last decision.
func (l *Limiter) Degraded() bool { return l.degraded.Load() }
