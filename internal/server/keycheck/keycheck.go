// Package keycheck decides whether a request's API key lets it through. It is the one decision
// every protocol shares: /v1 (internal/server/v1api), Envoy's ext_authz and the forward-auth endpoints
// (internal/server/authz) each turn their request into a Request and the Verdict into their answer, and
// decide nothing themselves, so that a key, a rate limit, a source range, an audience and a
// revocation behave the same on every route of the platform.
//
// The steps, in order:
//
//	ready gate → strict Bearer parse → checksum → SHA-256 → one index lookup → failure limiter
//	(failures only) → binding → audience → source ranges → permissions → rate limit
//
// Authentication comes before the failure limiter so that a valid key is answered whatever
// others sharing its address have done (docs/security.md, section 3), and before the policy so
// that only the key's holder learns what the key may do. The audience comes first among the
// policy: a key used where it may not be takes nothing from its budget; nor does a request its
// permissions refuse.
//
// A decision makes no API call; the index is fed from informers elsewhere (internal/server/indexfeed).
package keycheck

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop"
)

const (
	// DefaultKeyPrefix begins every valid key unless the server is told otherwise.
	DefaultKeyPrefix = apikey.DefaultPrefix
	// DefaultRedisTimeout bounds one rate-limit decision in Redis; past it, memory decides.
	DefaultRedisTimeout = ratelimit.DefaultRedisTimeout
)

// ValidatePrefix says what is wrong with a key prefix, so that a server is never started with
// one no key can have; nil when nothing is.
func ValidatePrefix(prefix string) error { return apikey.ValidatePrefix(prefix) }

// Config is what a Checker decides with.
type Config struct {
	// Index is where keys are looked up (internal/server/indexfeed fills it). Required.
	Index *keyindex.Index
	// Ready says the index has synced. Until it has, every decision is 503 NOT_READY: a key
	// must never be judged against a partial index. Required.
	Ready *atomic.Bool
	// KeyPrefix begins every valid key (DefaultKeyPrefix when empty).
	KeyPrefix string
	// Clock decides expiry, grace and the keys' rate limits; the real clock when nil.
	Clock clock.PassiveClock

	// TrustedProxies are the peers whose X-Forwarded-For is believed to find the client address.
	TrustedProxies []netip.Prefix
	// PeersAreProxies says that the peers are proxies: one outside TrustedProxies gives no
	// client address at all, so a key with allowed source ranges is refused rather than judged
	// by the proxy's address.
	PeersAreProxies bool

	// FailureRate is how many failed authentications per second an address regains; ≤ 0
	// disables the failure limiter.
	FailureRate float64
	// FailureBurst is how many failures an address may make at once.
	FailureBurst int
	// FailureClients bounds how many addresses the failure limiter remembers.
	FailureClients int

	// RateLimitRedis, when set, is the redis:// (or rediss://) URL of the Redis that keeps the
	// budgets of keys' rate limits, shared by every replica; empty keeps them in memory.
	RateLimitRedis string
	// RateLimitRedisPassword, when set, replaces the URL's password.
	RateLimitRedisPassword string
	// RateLimitRedisTimeout bounds one decision in Redis (DefaultRedisTimeout when zero).
	RateLimitRedisTimeout time.Duration
	// CreditsOnRedisFailure is what a key with credits gets while Redis fails, a
	// ratelimit.CreditsFailureMode (refused when empty); CreditReplicas how many replicas share
	// credits decided in memory (ratelimit.Options).
	CreditsOnRedisFailure string
	CreditReplicas        int
	// Logger receives the rate limiter's lines about Redis.
	Logger logr.Logger

	// Tokens verifies the ServiceAccount tokens presented with keys bound to workloads; nil:
	// no token proves anything (binding.go).
	Tokens TokenVerifier
	// TrustDomain is the SPIFFE trust domain a token's workload is named in when a binding
	// lists SPIFFE IDs (DefaultTrustDomain when empty).
	TrustDomain string
	// ClientCertHeader names the header in which an edge proxy that terminated mutual TLS
	// tells the client's certificate, in Envoy's X-Forwarded-Client-Cert format; its SPIFFE ID
	// is the peer of /v1's and forward-auth's requests from TrustedProxies (clientcert.go).
	// "": none is read.
	ClientCertHeader string
}

// DefaultTrustDomain is Istio's default trust domain.
const DefaultTrustDomain = "cluster.local"

// Checker makes the decision. It is safe for concurrent use.
type Checker struct {
	index    *keyindex.Index
	prefix   string
	clock    clock.PassiveClock
	ready    *atomic.Bool
	failures *failureLimiter
	// keys decides keys' rate limits; only consulted for a key that has one.
	keys            *ratelimit.Limiter
	trusted         []netip.Prefix
	peersAreProxies bool
	// tokens, trustDomain and proofs prove the workload presenting a bound key (binding.go).
	tokens      TokenVerifier
	trustDomain string
	proofs      *dpop.Verifier
	// clientCertHeader is Config.ClientCertHeader as http.Header keys it.
	clientCertHeader string
}

// New returns the Checker of c, or what is wrong with c.
func New(c Config) (*Checker, error) {
	if c.Index == nil || c.Ready == nil {
		return nil, errors.New("keycheck: an index and its readiness are required")
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.TrustDomain == "" {
		c.TrustDomain = DefaultTrustDomain
	}
	keys, err := newKeyLimiter(&c)
	if err != nil {
		return nil, err
	}
	return &Checker{
		index: c.Index, prefix: c.KeyPrefix, clock: c.Clock, ready: c.Ready,
		failures: newFailureLimiter(c.FailureRate, c.FailureBurst, c.FailureClients),
		keys:     keys, trusted: c.TrustedProxies, peersAreProxies: c.PeersAreProxies,
		tokens: c.Tokens, trustDomain: c.TrustDomain, proofs: dpop.NewVerifier(dpop.Options{Clock: c.Clock}),
		clientCertHeader: canonicalHeader(c.ClientCertHeader),
	}, nil
}

// Run keeps the keys' rate limiter until ctx is done (it sweeps the budgets held in memory).
func (c *Checker) Run(ctx context.Context) { c.keys.Run(ctx) }

// Degraded reports whether keys' rate limits are being decided in memory, per replica, because
// the configured Redis failed.
func (c *Checker) Degraded() bool { return c.keys.Degraded() }

// Request is what a decision needs, gathered by each protocol from its own request.
type Request struct {
	// Authorization are the values of the Authorization field (more than one is malformed).
	Authorization []string
	// The client's address: read from HTTP by the trusted-proxy rules when it is set (lazily:
	// only decisions that need it pay for it), else Addr. AddrKnown is false when it cannot be
	// known (the peer is a proxy this server does not trust), which keys with source ranges
	// fail closed on.
	HTTP      *http.Request
	Addr      netip.Addr
	AddrKnown bool
	// Audience is the route's audience, from the server's configuration or the gateway's,
	// never from anything the client sends.
	Audience string
	// Method and Path are the request's, which a key's permissions are matched against: the
	// request's own on /v1, the original request's as the gateway tells it on a check; empty
	// when it does not (rules that name them then fail closed).
	Method, Path string
	// Now is the time the key is judged at (Checker.Now of the request's start).
	Now time.Time
	// Proofs are what the request carries to prove which workload presents it, read only for
	// a key bound to workloads (binding.go); nil: none.
	Proofs Proofs
}

// Now is the time a request that began at start is judged at: start itself on the real clock
// (a clock read costs as much as a tenth of the rest of the request), else the injected
// clock's time.
func (c *Checker) Now(start time.Time) time.Time {
	if _, real := c.clock.(clock.RealClock); real {
		return start
	}
	return c.clock.Now()
}

// Decide decides req. It makes no API call and does not allocate.
func (c *Checker) Decide(ctx context.Context, req *Request) Verdict {
	if !c.ready.Load() {
		// Never judge a key against a cache that has not synced: fail closed.
		return Verdict{Status: http.StatusServiceUnavailable, Code: apicode.NotReady, Message: msgNotReady, retryAfter: time.Second}
	}
	auth := authenticate(c.index, c.prefix, req.Authorization, req.Now)
	if auth.code != "" {
		client, _ := c.clientOf(req)
		return c.refusal(auth, client, req.Now)
	}
	key := auth.key
	if auth.binding != nil {
		if v, refused := c.bound(ctx, &auth, req); refused {
			// A wrong workload's request is no use of the key: it neither keeps the key
			// "used" (revokeWhenUnusedFor) nor holds a rotation's grace open on evidence.
			return v
		}
	}
	key.Usage().Touch(req.Now)
	if auth.previousGeneration > 0 {
		key.Usage().TouchPrevious(auth.previousGeneration, req.Now)
	}
	if !key.AllowsAudience(req.Audience) {
		return Verdict{auth: auth, Status: http.StatusForbidden, Code: apicode.AudienceNotAllowed, Message: msgAudienceNotAllowed}
	}
	if key.SourcesRestricted {
		client, known := c.clientOf(req)
		if !known {
			return Verdict{auth: auth, Status: http.StatusForbidden, Code: apicode.SourceNotAllowed, Message: msgSourceUnknown}
		}
		if !key.AllowsSource(client) {
			return Verdict{auth: auth, Status: http.StatusForbidden, Code: apicode.SourceNotAllowed, Message: msgSourceNotAllowed}
		}
	}
	if key.Permissions != nil {
		if v, refused := c.permitted(auth, req); refused {
			return v
		}
	}
	if key.CreditPoolMissing {
		return refusedForMissingPool(auth, key)
	}
	if key.RateLimit == nil {
		return Verdict{auth: auth, Status: http.StatusOK}
	}
	cost := int64(1)
	if key.Costs != nil {
		cost = key.Costs.Of(permission.Request{Method: req.Method, Path: req.Path, Audience: req.Audience})
	}
	d := c.keys.Allow(ctx, key.RateLimit, cost)
	if key.RateLimit.Credits != nil {
		countCredits(d.Result)
	}
	v := Verdict{auth: auth, Status: http.StatusOK, policy: key.RateLimit, result: d.Result, store: d.Store}
	if !d.Allowed {
		v.Status, v.Code, v.Message, v.retryAfter = http.StatusTooManyRequests, apicode.KeyRateLimited, msgKeyRateLimited, d.RetryAfter
		v.refusedForCredits(cost)
	}
	return v
}

// refusal decides a request whose authentication failed: 429 when its address has no failure
// left, else 401, counting the failure.
func (c *Checker) refusal(auth authOutcome, client netip.Addr, now time.Time) Verdict {
	if blocked, wait := c.failures.blocked(client, now); blocked {
		return Verdict{auth: auth, Status: http.StatusTooManyRequests, Code: apicode.RateLimited, Message: msgLimited, retryAfter: wait}
	}
	c.failures.fail(client, now)
	v := Verdict{auth: auth, Status: http.StatusUnauthorized, Code: auth.code}
	switch {
	case auth.code == apicode.APIKeyInvalid:
		v.Message, v.Challenge = msgInvalid, realm+`, error="invalid_token"`
	case auth.headerPresent:
		v.Message, v.Challenge = msgMissing, realm+`, error="invalid_request"`
	default:
		v.Message, v.Challenge = msgMissing, realm
	}
	return v
}

// clientOf is req's client address, and whether it can be known.
func (c *Checker) clientOf(req *Request) (netip.Addr, bool) {
	if req.HTTP != nil {
		return c.ClientAddress(req.HTTP), c.clientKnown(req.HTTP)
	}
	return req.Addr, req.AddrKnown
}
