package keycheck

import (
	"net/http"

	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// The policy step of the decision: what a valid key may do, from its APIKey's spec. It runs
// after authentication, so an unauthenticated caller learns nothing of a key's policy, and
// before any route is served, so every authenticated request counts, whatever it asks for.
//
//   - spec.audiences: a key used on a route whose audience they do not name gets 403
//     AUDIENCE_NOT_ALLOWED, and takes nothing from its budget.
//   - spec.allowedSourceRanges: a client outside them gets 403 SOURCE_NOT_ALLOWED, the client
//     being the address the trusted-proxy rules give (ClientAddress). Such a request takes
//     nothing from the key's budget and carries no RateLimit fields: whoever holds a key where
//     it may not be used learns nothing of its use. When the server cannot know the client's
//     address (--peers-are-proxies: the peer is a proxy it does not trust, so every client
//     would look like the proxy), the key is refused the same way, with a message that says
//     so: ranges that cannot be checked admit nobody, as ranges that do not parse.
//   - spec.permissions: a request no rule allows gets 403 API_KEY_PERMISSION_DENIED, its message
//     naming the rule that refused it (never the key), and takes nothing from its budget.
//   - spec.rateLimit: past it, 429 API_KEY_RATE_LIMITED with Retry-After. Every answer the
//     limiter decided carries RateLimit-Policy and RateLimit (internal/server/ratelimit, header.go).
//
// A key without a policy costs three comparisons here: the limiter is not consulted and its
// answers are exactly what they were before policies existed.

const (
	msgKeyRateLimited   = "This API key has used its rate limit; retry after the number of seconds in Retry-After (the RateLimit header field says what is left)."
	msgSourceNotAllowed = "This API key may not be used from this address: its allowed source ranges do not include it."
	msgSourceUnknown    = "This API key may be used only from its allowed source ranges, and this server cannot know the client's address (it runs behind a proxy whose X-Forwarded-For it does not trust), so it refuses the key everywhere. The operator must list the proxies in --trusted-proxies (the chart's server.trustedProxies)."
)

// clientKnown reports whether r's client address can be known: always, unless the peers are
// proxies (--peers-are-proxies) and this one is not trusted, so its X-Forwarded-For is not
// believed and its own address is the proxy's, not the client's.
func (c *Checker) clientKnown(r *http.Request) bool {
	return !c.peersAreProxies || clientaddr.Trusted(clientaddr.Parse(r.RemoteAddr), c.trusted)
}

// permitted decides req by its key's permissions: refused, with the verdict saying by which
// rule, or not.
func (c *Checker) permitted(auth authOutcome, req *Request) (Verdict, bool) {
	client, known := c.clientOf(req)
	d := auth.key.Permissions.Decide(permission.Request{Method: req.Method, Path: req.Path, Audience: req.Audience, Source: client, SourceKnown: known})
	if d.Allowed {
		return Verdict{}, false
	}
	return Verdict{auth: auth, Status: http.StatusForbidden, Code: apicode.PermissionDenied, Message: d.Refusal(req.Method, req.Path),
		permissionRule: d.Where(), permissionText: d.Text}, true
}

// newKeyLimiter builds the limiter of keys' rate limits: in memory, or on Redis when
// c.RateLimitRedis is set.
func newKeyLimiter(c *Config) (*ratelimit.Limiter, error) {
	o := ratelimit.Options{Timeout: c.RateLimitRedisTimeout, Clock: c.Clock, Logger: c.Logger,
		CreditsOnRedisFailure: ratelimit.CreditsFailureMode(c.CreditsOnRedisFailure), CreditReplicas: c.CreditReplicas}
	if c.RateLimitRedis != "" {
		r, err := ratelimit.NewRedis(ratelimit.RedisOptions{
			URL: c.RateLimitRedis, Password: c.RateLimitRedisPassword, Timeout: c.RateLimitRedisTimeout, Logger: c.Logger, Clock: c.Clock,
		})
		if err != nil {
			return nil, err
		}
		o.Remote = r
		c.Logger.Info("keys' rate limits are kept in Redis, exact across replicas", "timeout", c.RateLimitRedisTimeout,
			"creditsOnRedisFailure", o.CreditsOnRedisFailure)
	}
	if c.CreditReplicas > 1 {
		c.Logger.Info("keys' credits decided in memory are shared between replicas: each admits its share of a period",
			"replicas", c.CreditReplicas)
	}
	return ratelimit.New(o), nil
}
