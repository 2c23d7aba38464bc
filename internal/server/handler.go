package server

import (
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/switchboard-dev/switchboard/api/openapi"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
)

// handler serves the API port: /v1 (authenticated before routing) and /openapi.yaml.
type handler struct {
	index   *keyindex.Index
	prefix  string
	clock   clock.PassiveClock
	ready   *atomic.Bool
	limiter *failureLimiter
	trusted []netip.Prefix
	log     logr.Logger
}

// statusWriter remembers the status for metrics and the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := requestID(r)
	hdr := w.Header()
	hdr["X-Request-Id"] = []string{id}
	hdr["X-Content-Type-Options"] = headerNoSniff // shared, never modified: no allocation
	sw := &statusWriter{ResponseWriter: w}
	route := routeOther
	var hint string
	defer func() {
		if p := recover(); p != nil {
			h.log.Error(nil, "request panicked", "requestID", id, "panic", p)
			if sw.status == 0 {
				writeError(sw, http.StatusInternalServerError, CodeInternal, msgInternal)
			}
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := time.Since(start)
		requestsTotal.WithLabelValues(route, statusLabel(status)).Inc()
		requestDuration.WithLabelValues(route).Observe(elapsed.Seconds())
		if log := h.log.V(1); log.Enabled() {
			log.Info("request", "requestID", id, "method", r.Method, "path", r.URL.Path, "status", status,
				"duration", elapsed, "client", clientAddress(r, h.trusted), "key", hint)
		}
	}()

	path := r.URL.Path
	if !strings.HasPrefix(path, "/v1") {
		route = h.serveUnauthenticated(sw, r)
		return
	}
	route = routeV1Other
	if path == routeConnections {
		route = routeConnections
	}
	if !h.ready.Load() {
		// Never judge a key against a cache that has not synced.
		sw.Header().Set("Retry-After", "1")
		writeError(sw, http.StatusServiceUnavailable, CodeNotReady, msgNotReady)
		authTotal.WithLabelValues(CodeNotReady, "").Inc()
		return
	}
	now := h.clock.Now()
	client := clientAddress(r, h.trusted)
	if blocked, wait := h.limiter.blocked(client, now); blocked {
		sw.Header().Set("Retry-After", retryAfter(wait))
		writeError(sw, http.StatusTooManyRequests, CodeRateLimited, msgLimited)
		authTotal.WithLabelValues(CodeRateLimited, "").Inc()
		return
	}
	auth := authenticate(h.index, h.prefix, r.Header, now)
	if auth.code != "" {
		h.limiter.fail(client, now)
		if auth.token != "" && h.log.V(1).Enabled() {
			hint = apikey.Hint(auth.token)
		}
		reason := ""
		if auth.code == CodeAPIKeyInvalid {
			reason = auth.result.String()
		}
		authTotal.WithLabelValues(auth.code, reason).Inc()
		writeUnauthorized(sw, auth.code, auth.headerPresent)
		return
	}
	authTotal.WithLabelValues("ok", "").Inc()
	hint = auth.key.Hint
	auth.key.Usage().Touch(now)

	if route != routeConnections {
		writeError(sw, http.StatusNotFound, CodeNotFound, msgNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		sw.Header().Set("Allow", "GET, HEAD")
		writeError(sw, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "GET /v1/connections accepts GET and HEAD only.")
		return
	}
	h.listConnections(sw, r, auth.key)
}

// headerNoSniff is the X-Content-Type-Options value of every response. It must not be modified.
var headerNoSniff = []string{"nosniff"}

// statusLabel is status as a metric label, without formatting the statuses the API answers.
func statusLabel(status int) string {
	switch status {
	case http.StatusOK:
		return "200"
	case http.StatusNotModified:
		return "304"
	case http.StatusUnauthorized:
		return "401"
	case http.StatusNotFound:
		return "404"
	case http.StatusTooManyRequests:
		return "429"
	default:
		return strconv.Itoa(status)
	}
}

// serveUnauthenticated serves what lies outside /v1: the OpenAPI document, and 404 for the rest.
func (h *handler) serveUnauthenticated(w http.ResponseWriter, r *http.Request) string {
	if r.URL.Path != routeOpenAPI {
		writeError(w, http.StatusNotFound, CodeNotFound, msgNotFound)
		return routeOther
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "/openapi.yaml accepts GET and HEAD only.")
		return routeOpenAPI
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(openapi.Document)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(openapi.Document)
	}
	return routeOpenAPI
}

// requestID keeps a caller's X-Request-Id when it is short and plain, else makes one, so that a
// request can be followed from the Ingress to this server's log.
func requestID(r *http.Request) string {
	if v := r.Header.Get("X-Request-Id"); len(v) > 0 && len(v) <= 64 && plainID(v) {
		return v
	}
	var buf [16]byte
	// Request ids correlate log lines; they guard nothing, so a fast non-cryptographic source will do.
	return string(strconv.AppendUint(buf[:0], rand.Uint64(), 36)) //nolint:gosec // not a secret

}

func plainID(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '-' && c != '_' && c != '.' && !apikeyChar(c) {
			return false
		}
	}
	return true
}

func apikeyChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
