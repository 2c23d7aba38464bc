package server

import (
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// keyedHandler answers a request and returns the key it presented, when it was well-formed, so
// that the access log can show the key's hint (never the key, never a foreign token).
type keyedHandler interface {
	serve(w http.ResponseWriter, r *http.Request) (wellFormedKey string)
}

// instrumented is what every request of the API port gets, whatever it asks for: a request id,
// the constant headers, its status recorded for metrics, panic recovery, and the access log. It
// decides nothing: the wrapped handler does.
type instrumented struct {
	next    keyedHandler
	trusted []netip.Prefix
	log     logr.Logger
}

func instrument(next keyedHandler, trusted []netip.Prefix, log logr.Logger) *instrumented {
	return &instrumented{next: next, trusted: trusted, log: log}
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

func (in *instrumented) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := requestID(r)
	hdr := w.Header()
	hdr["X-Request-Id"] = []string{id}
	hdr["X-Content-Type-Options"] = headerNoSniff // shared, never modified: no allocation
	sw := &statusWriter{ResponseWriter: w}
	var key string
	defer func() {
		if p := recover(); p != nil {
			in.log.Error(nil, "request panicked", "requestID", id, "panic", p)
			if sw.status == 0 {
				writeError(sw, http.StatusInternalServerError, CodeInternal, msgInternal)
			}
		}
		in.record(r, id, sw.status, key, time.Since(start))
	}()
	key = in.next.serve(sw, r)
}

// record counts a finished request and writes its access log line (at verbosity 1).
func (in *instrumented) record(r *http.Request, id string, status int, key string, elapsed time.Duration) {
	if status == 0 {
		status = http.StatusOK
	}
	route := routeOf(r.URL.Path)
	requestsTotal.WithLabelValues(route, statusLabel(status)).Inc()
	requestDuration.WithLabelValues(route).Observe(elapsed.Seconds())
	if log := in.log.V(1); log.Enabled() {
		hint := ""
		if key != "" {
			hint = apikey.Hint(key)
		}
		log.Info("request", "requestID", id, "method", r.Method, "path", r.URL.Path, "status", status,
			"duration", elapsed, "client", clientAddress(r, in.trusted).String(), "key", hint)
	}
}

// routeOf is the route label of a path: bounded, never the raw path.
func routeOf(path string) string {
	switch {
	case path == routeConnections:
		return routeConnections
	case path == routeOpenAPI:
		return routeOpenAPI
	case strings.HasPrefix(path, "/v1"):
		return routeV1Other
	}
	return routeOther
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
		if c := s[i]; c != '-' && c != '_' && c != '.' && !alphanumeric(c) {
			return false
		}
	}
	return true
}

func alphanumeric(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
