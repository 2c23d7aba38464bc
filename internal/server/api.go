package server

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/switchboard-dev/switchboard/api/openapi"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
	"github.com/switchboard-dev/switchboard/internal/ratelimit"
)

// api decides what each request of the API port gets: /v1 (authenticated before routing) and
// /openapi.yaml. Instrumentation is around it (instrument.go), not in it.
type api struct {
	index   *keyindex.Index
	prefix  string
	clock   clock.PassiveClock
	ready   *atomic.Bool
	limiter *failureLimiter
	keys    *ratelimit.Limiter
	trusted []netip.Prefix
	// peersAreProxies: a peer outside trusted is a proxy, so it gives no client address.
	peersAreProxies bool
	// maxInFlight bounds the bytes of one namespace's responses being written (≤ 0: none).
	maxInFlight int64
}

// serve dispatches on the route (routes.go, found by instrument): /v1's are authenticated first.
func (a *api) serve(w http.ResponseWriter, r *http.Request, rt route, start time.Time) string {
	if !routes[rt].v1 {
		serveUnauthenticated(w, r, rt)
		return ""
	}
	return a.serveV1(w, r, rt, a.now(start))
}

// allowed answers 405, with Allow, when the route does not answer r's method; false then.
func allowed(w http.ResponseWriter, r *http.Request, rt route) bool {
	spec := &routes[rt]
	if spec.allows(r.Method) {
		return true
	}
	w.Header().Set("Allow", spec.allow)
	writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, spec.path+" accepts "+strings.ReplaceAll(spec.allow, ", ", " and ")+" only.")
	return false
}

// now is the time keys are judged at: the request's start on the real clock (a clock read
// costs as much as a tenth of the rest of the request), else the injected clock's time.
func (a *api) now(start time.Time) time.Time {
	if _, real := a.clock.(clock.RealClock); real {
		return start
	}
	return a.clock.Now()
}

// serveV1 answers a /v1 request: ready gate → authenticate → failure limiter → the key's policy
// → route → list.
//
// The limiter comes after authentication on purpose: it counts and refuses failures only, so a
// valid key is answered whatever others sharing its address (a NAT, a proxy) have done; an
// address out of failures gets 429 instead of 401. docs/security.md (section 3) argues why this
// costs nothing against guessing. The key's policy comes after authentication too, so that
// only the key's holder learns what the key may do.
func (a *api) serveV1(w http.ResponseWriter, r *http.Request, rt route, now time.Time) (wellFormedKey string) {
	if !a.ready.Load() {
		// Never judge a key against a cache that has not synced.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, CodeNotReady, msgNotReady)
		authNotReady.Inc()
		return ""
	}
	auth := authenticate(a.index, a.prefix, r.Header, now)
	if auth.code != "" {
		a.refuse(w, r, auth, now)
		return auth.wellFormed
	}
	authOK.Inc()
	auth.key.Usage().Touch(now)
	if !a.enforcePolicy(w, r, auth.key) {
		return auth.wellFormed
	}

	if rt != routeIDConnections {
		writeError(w, http.StatusNotFound, CodeNotFound, msgNotFound)
		return auth.wellFormed
	}
	if !allowed(w, r, rt) {
		return auth.wellFormed
	}
	a.listConnections(w, r, auth.key)
	return auth.wellFormed
}

// refuse answers a request whose authentication failed: 429 when its address has no failure
// left, else 401, counting the failure.
func (a *api) refuse(w http.ResponseWriter, r *http.Request, auth authOutcome, now time.Time) {
	client := clientAddress(r, a.trusted)
	if blocked, wait := a.limiter.blocked(client, now); blocked {
		w.Header().Set("Retry-After", retryAfter(wait))
		writeError(w, http.StatusTooManyRequests, CodeRateLimited, msgLimited)
		authRateLimited.Inc()
		return
	}
	a.limiter.fail(client, now)
	reason := ""
	if auth.code == CodeAPIKeyInvalid {
		reason = auth.result.String()
	}
	authTotal.WithLabelValues(auth.code, reason).Inc()
	writeUnauthorized(w, auth.code, auth.headerPresent)
}

// serveUnauthenticated serves what lies outside /v1: the OpenAPI document, and 404 for the rest.
func serveUnauthenticated(w http.ResponseWriter, r *http.Request, rt route) {
	if rt != routeIDOpenAPI {
		writeError(w, http.StatusNotFound, CodeNotFound, msgNotFound)
		return
	}
	if !allowed(w, r, rt) {
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(openapi.Document)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(openapi.Document)
	}
}
