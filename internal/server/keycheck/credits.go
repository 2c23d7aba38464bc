package keycheck

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// spec.credits: a key whose credits for the period are spent gets 429 API_KEY_CREDITS_EXHAUSTED
// with Retry-After to the refill, and its RateLimit fields carry a "credits" item. The limiter
// decides credits with the rate in one step (internal/server/ratelimit), so they come back in
// its Result. With Redis, credits fail closed: while it does not answer, a key with credits gets
// 503 NOT_READY without RateLimit fields (nothing was decided), since deciding them in memory
// would let each replica sell the period's credits again. Unlike the rest of the decision, a
// key with credits allocates (the period's name in the limiter, the refusal's message).

const (
	msgCreditsExhausted   = "The key's credits for this period are spent; they refill at "
	msgCreditsUnavailable = "The server cannot count this API key's credits: the Redis that keeps them does not answer; retry after the number of seconds in Retry-After."
)

// The credits' decisions, by result and never by key (a tenant's number of keys must not be the
// number of series); switchboard_api_credit_keys (internal/server/lastused) says how far into
// their periods the keys are.
var (
	creditsCharged = metrics.Registered.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_api_credits_charged_total",
		Help: "Requests of keys with credits decided by their credits, by result: admitted (credits spent), exhausted (429 API_KEY_CREDITS_EXHAUSTED), unavailable (503: the Redis that counts them did not answer) or refunded (admitted, charged on success, and given back: the answer was not a success). Requests the rate refused first are not counted.",
	}, []string{"result"})

	// Resolved once: counting costs no lookup and no allocation on the request path.
	chargedAdmitted    = creditsCharged.WithLabelValues("admitted")
	chargedExhausted   = creditsCharged.WithLabelValues("exhausted")
	chargedUnavailable = creditsCharged.WithLabelValues("unavailable")
	// chargedRefunded counts the admitted requests given their credits back (charge OnSuccess).
	chargedRefunded = creditsCharged.WithLabelValues("refunded")

	refundsLost = metrics.Registered.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_api_credits_refunds_lost_total",
		Help: "Refunds of requests charged on success whose answer was not a success, lost because the Redis that counts the credits did not answer: those requests stay charged.",
	})
)

// countCredits counts the credits' part of r, the limiter's decision on a request of a key
// with credits.
func countCredits(r ratelimit.Result) {
	switch {
	case r.Credits.Exhausted:
		chargedExhausted.Inc()
	case r.Credits.Unavailable:
		chargedUnavailable.Inc()
	case r.Allowed:
		chargedAdmitted.Inc()
	}
}

// msgCreditPoolMissing is the refusal of a key whose spec.creditPool names a pool that does not
// exist: it has no credits to spend, rather than credits without end (the platform that named
// the pool meant it to be counted). Retry-After is creditPoolRetry: the pool may be created.
const (
	msgCreditPoolMissing = " does not exist in the key's namespace, so the key has no credits to spend."
	creditPoolRetry      = time.Minute
)

// refusedForMissingPool is the refusal of key, whose credit pool does not exist.
func refusedForMissingPool(auth authOutcome, key *keyindex.Key) Verdict {
	chargedExhausted.Inc() // a 429 API_KEY_CREDITS_EXHAUSTED as any other
	return Verdict{auth: auth, Status: http.StatusTooManyRequests, Code: apicode.KeyCreditsExhausted,
		Message: "The key's credit pool " + strconv.Quote(key.CreditPool) + msgCreditPoolMissing, retryAfter: creditPoolRetry}
}

// refusedForCredits turns v, a refusal of the key's limiter, into the credits' refusal when
// they, rather than the rate, refused it.
func (v *Verdict) refusedForCredits(cost int64) {
	switch c := v.result.Credits; {
	case c.Exhausted && cost > 1:
		v.Code, v.Message = apicode.KeyCreditsExhausted, "The key has "+strconv.FormatInt(c.Remaining, 10)+" credits left for this period and this request costs "+
			strconv.FormatInt(cost, 10)+"; they refill at "+c.RefillAt.Format(time.RFC3339)+"."
	case c.Exhausted:
		v.Code, v.Message = apicode.KeyCreditsExhausted, msgCreditsExhausted+c.RefillAt.Format(time.RFC3339)+"."
	case c.Unavailable:
		v.Status, v.Code, v.Message, v.policy = http.StatusServiceUnavailable, apicode.NotReady, msgCreditsUnavailable, nil
	}
}

// CreditBalance reads the credits of the key whose policy is p, spending none: for the status
// writer (internal/server/lastused), not for requests.
func (c *Checker) CreditBalance(ctx context.Context, p *ratelimit.Policy) (ratelimit.Balance, bool, error) {
	return c.keys.Balance(ctx, p)
}

// Settle completes the charge of v, an admitted request, once its answer is known: the key's
// spec.credits.charge OnSuccess gives back what it was charged when the answer is not a
// success (2xx), and v's RateLimit fields, when written after, count it back. For /v1, which
// answers the request itself; a gateway's request is charged when admitted, the server never
// seeing its answer. A refund Redis does not answer (within the limiter's timeout) is lost: the
// request stays charged, never the other way round. Settling twice refunds once.
func (c *Checker) Settle(ctx context.Context, v *Verdict, status int) {
	key := v.Key()
	charged := v.result.Credits.Charged
	if key == nil || !key.ChargeOnSuccess || !v.Allowed() || charged.Total() == 0 || status >= 200 && status < 300 {
		return
	}
	if err := c.keys.Refund(ctx, v.policy, ratelimit.Decision{Result: v.result, Store: v.store}); err != nil {
		refundsLost.Inc()
		return
	}
	v.result.Credits.Remaining += charged.Total()
	v.result.Credits.Charged = ratelimit.Charge{}
	chargedRefunded.Inc()
}
