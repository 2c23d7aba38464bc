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
	// audience is the server's own /v1's audience (--audience): keys that name audiences must
	// name it.
	audience string
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

// serveV1 answers a /v1 request: the one decision every protocol shares (check.go), for the
// server's own audience, then the route and the list.
func (a *api) serveV1(w http.ResponseWriter, r *http.Request, rt route, now time.Time) (wellFormedKey string) {
	req := checkRequest{authorization: r.Header["Authorization"], httpReq: r, audience: a.audience}
	v := a.check(r.Context(), &req, now)
	countAuth(&v)
	if v.policy != nil {
		ratelimit.SetHeaders(w.Header(), v.policy, v.result)
	}
	if !v.allowed() {
		writeDenial(w, &v)
		return v.auth.wellFormed
	}
	if rt != routeIDConnections {
		writeError(w, http.StatusNotFound, CodeNotFound, msgNotFound)
		return v.auth.wellFormed
	}
	if !allowed(w, r, rt) {
		return v.auth.wellFormed
	}
	a.listConnections(w, r, v.auth.key)
	return v.auth.wellFormed
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
