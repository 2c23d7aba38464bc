package v1api

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/apierror"
)

// instrumented is what every request of the API port gets, whatever it asks for: a request id,
// the constant headers, its status recorded for metrics, panic recovery, and the access log. It
// decides nothing: the wrapped api does.
type instrumented struct {
	next *api
	log  logr.Logger
	// accessLog says the access log is on (verbosity 1): the level is set at start, so it is
	// asked once, not per request.
	accessLog bool
}

func instrument(next *api, log logr.Logger) *instrumented {
	return &instrumented{next: next, log: log, accessLog: log.V(1).Enabled()}
}

// statusWriter remembers the status for metrics and the access log. It escapes through the
// http.ResponseWriter interface, so writers are pooled rather than allocated per request.
type statusWriter struct {
	http.ResponseWriter
	status int
}

var statusWriters = sync.Pool{New: func() any { return new(statusWriter) }}

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
	ids := requestID(r)
	id := ids[0]
	hdr := w.Header()
	hdr["X-Request-Id"] = ids
	hdr["X-Content-Type-Options"] = headerNoSniff // shared, never modified: no allocation
	sw := statusWriters.Get().(*statusWriter)
	sw.ResponseWriter = w
	var hint string
	rt := routeOf(r.URL.Path) // once, for the handler and the metrics
	defer func() {
		if p := recover(); p != nil {
			in.log.Error(nil, "request panicked", "requestID", id, "panic", p)
			if sw.status == 0 {
				apierror.Write(sw, http.StatusInternalServerError, apicode.Internal, msgInternal)
			}
		}
		in.record(r, rt, id, sw.status, hint, time.Since(start))
		*sw = statusWriter{} // nothing of this request stays reachable from the pool
		statusWriters.Put(sw)
	}()
	hint = in.next.serve(sw, r, rt, start, in.accessLog)
}

// record counts a finished request and writes its access log line (at verbosity 1), with the
// hint of the key it presented (never the key, never a foreign token).
func (in *instrumented) record(r *http.Request, rt route, id string, status int, hint string, elapsed time.Duration) {
	if status == 0 {
		status = http.StatusOK
	}
	countRequest(rt, status, elapsed.Seconds())
	if in.accessLog {
		in.log.V(1).Info("request", "requestID", id, "method", r.Method, "path", r.URL.Path, "status", status,
			"duration", elapsed, "client", in.next.checker.ClientAddress(r).String(), "key", hint)
	}
}

// headerNoSniff is the X-Content-Type-Options value of every response. It must not be modified.
var headerNoSniff = []string{"nosniff"}

// requestID keeps a caller's X-Request-Id when it is short and plain, else makes one, so that a
// request can be followed from the Ingress to this server's log. It returns the header value.
func requestID(r *http.Request) []string {
	// Direct map access: incoming header keys are canonical, and Get would canonicalise again.
	if vs := r.Header["X-Request-Id"]; len(vs) > 0 {
		if v := vs[0]; len(v) <= 64 && v != "" && plainID(v) {
			return vs[:1:1] // the request's own value, shared read-only
		}
	}
	b := idBatches.Get().(*idBatch)
	id := b.take()
	idBatches.Put(b)
	return id
}

// Generated request ids are cut from one string made for a batch of them, each already in a
// one-element header value, so that an id costs no allocation of its own. Ids correlate log
// lines; they guard nothing, so a fast non-cryptographic source will do.
const (
	idBatchSize = 64
	idLength    = 16 // hex digits of a random uint64
)

var idBatches = sync.Pool{New: func() any { return new(idBatch) }}

type idBatch struct {
	vals []string
	next int
}

// take returns the next id as a header value of capacity one: an append to it copies.
func (b *idBatch) take() []string {
	if b.next == len(b.vals) {
		b.fill()
	}
	v := b.vals[b.next : b.next+1 : b.next+1]
	b.next++
	return v
}

func (b *idBatch) fill() {
	const hexDigits = "0123456789abcdef"
	var sb strings.Builder
	sb.Grow(idBatchSize * idLength)
	var id [idLength]byte
	for range idBatchSize {
		x := rand.Uint64() //nolint:gosec // not a secret
		for i := idLength - 1; i >= 0; i-- {
			id[i] = hexDigits[x&0xf]
			x >>= 4
		}
		sb.Write(id[:])
	}
	all := sb.String()
	b.vals = make([]string, idBatchSize)
	for i := range b.vals {
		b.vals[i] = all[i*idLength : (i+1)*idLength]
	}
	b.next = 0
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
