package server

import (
	"net/http"

	"github.com/go-logr/logr"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/ratelimit"
)

// The policy step of the decision (check.go): what a valid key may do, from its APIKey's spec. It runs
// after authentication, so an unauthenticated caller learns nothing of a key's policy, and
// before routing, so every authenticated request counts, whatever it asks for.
//
//   - spec.allowedSourceRanges: a client outside them gets 403 SOURCE_NOT_ALLOWED, the client
//     being the address the trusted-proxy rules give (clientAddress). Such a request takes
//     nothing from the key's budget and carries no RateLimit fields: whoever holds a key where
//     it may not be used learns nothing of its use. When the server cannot know the client's
//     address (--peers-are-proxies: the peer is a proxy it does not trust, so every client
//     would look like the proxy), the key is refused the same way, with a message that says
//     so: ranges that cannot be checked admit nobody, as ranges that do not parse.
//   - spec.rateLimit: past it, 429 API_KEY_RATE_LIMITED with Retry-After. Every response the
//     limiter decided carries RateLimit-Policy and RateLimit (internal/ratelimit, header.go).
//
// A key without a policy costs two comparisons here: the limiter is not consulted and its
// responses are exactly what they were before policies existed.

const (
	msgKeyRateLimited   = "This API key has used its rate limit; retry after the number of seconds in Retry-After (the RateLimit header field says what is left)."
	msgSourceNotAllowed = "This API key may not be used from this address: its allowed source ranges do not include it."
	msgSourceUnknown    = "This API key may be used only from its allowed source ranges, and this server cannot know the client's address (it runs behind a proxy whose X-Forwarded-For it does not trust), so it refuses the key everywhere. The operator must list the proxies in --trusted-proxies (the chart's server.trustedProxies)."
)

// clientKnown reports whether r's client address can be known: always, unless the peers are
// proxies (--peers-are-proxies) and this one is not trusted, so its X-Forwarded-For is not
// believed and its own address is the proxy's, not the client's.
func (a *api) clientKnown(r *http.Request) bool {
	return !a.peersAreProxies || clientaddr.Trusted(clientaddr.Parse(r.RemoteAddr), a.trusted)
}

// newKeyLimiter builds the limiter of keys' rate limits: in memory, or on Redis when
// opts.RateLimitRedis is set.
func newKeyLimiter(opts *Options, log logr.Logger) (*ratelimit.Limiter, error) {
	o := ratelimit.Options{Timeout: opts.RateLimitRedisTimeout, Clock: opts.Clock, Logger: log}
	if opts.RateLimitRedis != "" {
		r, err := ratelimit.NewRedis(ratelimit.RedisOptions{
			URL: opts.RateLimitRedis, Password: opts.RateLimitRedisPassword, Timeout: opts.RateLimitRedisTimeout, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		o.Remote = r
		log.Info("keys' rate limits are kept in Redis, exact across replicas", "timeout", opts.RateLimitRedisTimeout)
	}
	return ratelimit.New(o), nil
}
