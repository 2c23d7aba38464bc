package server

import (
	"context"
	"net/http"
	"net/netip"
	"time"

	"github.com/switchboard-dev/switchboard/internal/ratelimit"
)

// One decision, whoever asks: /v1 (api.go), the forward-auth endpoints (forwardauth.go) and
// Envoy's ext_authz (extauthz.go) all call check, so a key, a rate limit, a source range, an
// audience and a revocation behave the same on every route of the platform.
//
// The steps, in order:
//
//	ready gate → strict Bearer parse → checksum → SHA-256 → one index lookup → failure limiter
//	(failures only) → audience → source ranges → rate limit
//
// Authentication comes before the failure limiter so that a valid key is answered whatever
// others sharing its address have done (docs/security.md, section 3), and before the policy so
// that only the key's holder learns what the key may do. The audience comes first among the
// policy: a key used where it may not be takes nothing from its budget.

const msgAudienceNotAllowed = "This API key may not be used for this API: its audiences do not include the one this route belongs to."

// checkRequest is what a decision needs, gathered by each protocol from its own request.
type checkRequest struct {
	// authorization are the values of the Authorization field (more than one is malformed).
	authorization []string
	// The client's address: read from httpReq by the trusted-proxy rules when set (lazily: only
	// decisions that need it pay for it), else addr. addrKnown is false when it cannot be known
	// (the peer is a proxy this server does not trust), which keys with source ranges fail
	// closed on.
	httpReq   *http.Request
	addr      netip.Addr
	addrKnown bool
	// audience is the route's audience, from the server's configuration or the gateway's,
	// never from anything the client sends.
	audience string
}

// verdict is a decision: allowed when code is empty (status 200), else the status and error
// code every protocol answers with. It is a value, so deciding allocates nothing.
type verdict struct {
	auth    authOutcome
	status  int
	code    string
	message string
	// challenge is the WWW-Authenticate value of a 401.
	challenge string
	// retryAfter is set on 429 and 503.
	retryAfter time.Duration
	// policy and result, when policy is set, are the RateLimit fields' source: every decision
	// the key's limiter made carries them, allowed or not.
	policy *ratelimit.Policy
	result ratelimit.Result
}

func (v *verdict) allowed() bool { return v.code == "" }

// check decides req at now. It makes no API call.
func (a *api) check(ctx context.Context, req *checkRequest, now time.Time) verdict {
	if !a.ready.Load() {
		// Never judge a key against a cache that has not synced: fail closed.
		return verdict{status: http.StatusServiceUnavailable, code: CodeNotReady, message: msgNotReady, retryAfter: time.Second}
	}
	auth := authenticate(a.index, a.prefix, req.authorization, now)
	if auth.code != "" {
		client, _ := a.clientOf(req)
		return a.refusal(auth, client, now)
	}
	key := auth.key
	key.Usage().Touch(now)
	if !key.AllowsAudience(req.audience) {
		return verdict{auth: auth, status: http.StatusForbidden, code: CodeAudienceNotAllowed, message: msgAudienceNotAllowed}
	}
	if key.SourcesRestricted {
		client, known := a.clientOf(req)
		if !known {
			return verdict{auth: auth, status: http.StatusForbidden, code: CodeSourceNotAllowed, message: msgSourceUnknown}
		}
		if !key.AllowsSource(client) {
			return verdict{auth: auth, status: http.StatusForbidden, code: CodeSourceNotAllowed, message: msgSourceNotAllowed}
		}
	}
	if key.RateLimit == nil {
		return verdict{auth: auth, status: http.StatusOK}
	}
	d := a.keys.Allow(ctx, key.RateLimit)
	v := verdict{auth: auth, status: http.StatusOK, policy: key.RateLimit, result: d.Result}
	if !d.Allowed {
		v.status, v.code, v.message, v.retryAfter = http.StatusTooManyRequests, CodeKeyRateLimited, msgKeyRateLimited, d.RetryAfter
	}
	return v
}

// refusal decides a request whose authentication failed: 429 when its address has no failure
// left, else 401, counting the failure.
func (a *api) refusal(auth authOutcome, client netip.Addr, now time.Time) verdict {
	if blocked, wait := a.limiter.blocked(client, now); blocked {
		return verdict{auth: auth, status: http.StatusTooManyRequests, code: CodeRateLimited, message: msgLimited, retryAfter: wait}
	}
	a.limiter.fail(client, now)
	v := verdict{auth: auth, status: http.StatusUnauthorized, code: auth.code}
	switch {
	case auth.code == CodeAPIKeyInvalid:
		v.message, v.challenge = msgInvalid, realm+`, error="invalid_token"`
	case auth.headerPresent:
		v.message, v.challenge = msgMissing, realm+`, error="invalid_request"`
	default:
		v.message, v.challenge = msgMissing, realm
	}
	return v
}

// setDenialHeaders writes Retry-After and the challenge, when the verdict has them.
func (v *verdict) setDenialHeaders(h http.Header) {
	if v.retryAfter > 0 {
		h.Set("Retry-After", retryAfter(v.retryAfter))
	}
	if v.challenge != "" {
		h.Set("WWW-Authenticate", v.challenge)
	}
}

// writeDenial answers a denied request with its status, header fields and JSON error.
// The RateLimit fields are the caller's: /v1 writes them on every answer the limiter decided.
func writeDenial(w http.ResponseWriter, v *verdict) {
	v.setDenialHeaders(w.Header())
	writeError(w, v.status, v.code, v.message)
}

// clientOf is req's client address, and whether it can be known.
func (a *api) clientOf(req *checkRequest) (netip.Addr, bool) {
	if req.httpReq != nil {
		return clientAddress(req.httpReq, a.trusted), a.clientKnown(req.httpReq)
	}
	return req.addr, req.addrKnown
}
