// Package v1api serves the API port: GET /v1/connections, answered from the index (package
// keyindex) in pre-encoded JSON for the key keycheck's decision allowed, and /openapi.yaml. It
// makes no API-server call per request.
//
// A request passes two layers. instrument (instrument.go) does what every request gets: a
// request id, the constant headers, the status for metrics, panic recovery and the access log.
// Inside it, api.serve (api.go) adapts /v1 to the decision (keycheck.Checker.Decide: its
// verdict becomes the status, header fields and JSON error), then routes (routes.go) and lists
// (list.go, in the wire format of wire.go).
package v1api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/switchboard-dev/switchboard/api/openapi"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/apierror"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

const (
	msgNotFound = "There is nothing at this path. The API serves GET /v1/connections."
	msgInternal = "The server failed to answer; retry, and report the request id if it persists."

	msgTooManyConcurrent = "Too many responses for this namespace's keys are being sent at once (slow readers hold them until read); retry after the number of seconds in Retry-After, read responses promptly, and page large lists with ?limit=."
)

// Config is what the API port serves with.
type Config struct {
	// Checker decides every /v1 request. Required.
	Checker *keycheck.Checker
	// Index holds the Connections listed (the one the checker looks keys up in). Required.
	Index *keyindex.Index
	// Audience is the server's own /v1's audience (--audience): keys that name audiences must
	// name it.
	Audience string
	// MaxInFlightBytesPerNamespace bounds the bytes of one namespace's responses being written
	// (≤ 0: none).
	MaxInFlightBytesPerNamespace int64
	// Logger receives the access log (at verbosity 1) and panics.
	Logger logr.Logger
}

// New returns the API port's handler.
func New(c Config) http.Handler {
	return instrument(&api{checker: c.Checker, index: c.Index, audience: c.Audience, maxInFlight: c.MaxInFlightBytesPerNamespace}, c.Logger)
}

// api decides what each request of the API port gets: /v1 (authenticated before routing) and
// /openapi.yaml. Instrumentation is around it (instrument.go), not in it.
type api struct {
	checker *keycheck.Checker
	index   *keyindex.Index
	// audience is the server's own /v1's audience (--audience).
	audience string
	// maxInFlight bounds the bytes of one namespace's responses being written (≤ 0: none).
	maxInFlight int64
}

// serve dispatches on the route (routes.go, found by instrument): /v1's are authenticated
// first. With wantHint (the access log is on), it returns the hint of the key a /v1 request
// presented, when it was well-formed.
func (a *api) serve(w http.ResponseWriter, r *http.Request, rt route, start time.Time, wantHint bool) (hint string) {
	if !routes[rt].v1 {
		serveUnauthenticated(w, r, rt)
		return ""
	}
	return a.serveV1(w, r, rt, start, wantHint)
}

// allowed answers 405, with Allow, when the route does not answer r's method; false then.
func allowed(w http.ResponseWriter, r *http.Request, rt route) bool {
	spec := &routes[rt]
	if spec.allows(r.Method) {
		return true
	}
	w.Header().Set("Allow", spec.allow)
	apierror.Write(w, http.StatusMethodNotAllowed, apicode.MethodNotAllowed, spec.path+" accepts "+strings.ReplaceAll(spec.allow, ", ", " and ")+" only.")
	return false
}

// serveV1 answers a /v1 request: the one decision every protocol shares, for the server's own
// audience, then the route and the list.
func (a *api) serveV1(w http.ResponseWriter, r *http.Request, rt route, start time.Time, wantHint bool) (hint string) {
	req := keycheck.Request{Authorization: r.Header["Authorization"], HTTP: r, Audience: a.audience, Now: a.checker.Now(start),
		Method: r.Method, Path: r.URL.EscapedPath(), Proofs: keycheck.HTTPProofs{Request: r}}
	v := a.checker.Decide(r.Context(), &req)
	if wantHint {
		hint = v.Hint()
	}
	countAuth(&v)
	routed := rt == routeIDConnections && routes[rt].allows(r.Method)
	if !routed {
		// A key charged on success gets its credits back before its RateLimit fields are written.
		a.checker.Settle(r.Context(), &v, http.StatusNotFound)
	}
	h := w.Header()
	// The RateLimit fields go on every answer the key's limiter decided.
	v.SetRateLimitHeaders(h)
	if !v.Allowed() {
		v.SetDenialHeaders(h)
		apierror.Write(w, v.Status, v.Code, v.Message)
		return hint
	}
	if rt != routeIDConnections {
		apierror.Write(w, http.StatusNotFound, apicode.NotFound, msgNotFound)
		return hint
	}
	if !allowed(w, r, rt) {
		return hint
	}
	a.checker.Settle(r.Context(), &v, a.listConnections(w, r, v.Key()))
	return hint
}

// serveUnauthenticated serves what lies outside /v1: the OpenAPI document, and 404 for the rest.
func serveUnauthenticated(w http.ResponseWriter, r *http.Request, rt route) {
	if rt != routeIDOpenAPI {
		apierror.Write(w, http.StatusNotFound, apicode.NotFound, msgNotFound)
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
