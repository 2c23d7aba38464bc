package frontdoor

import (
	"context"
	"crypto/tls"
	stdlog "log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/metrics"
)

// The HTTP door. Each open connection costs the process memory whoever opened it and whatever
// it asked: in Go its goroutine and buffers (about 20 KiB), and in the kernel what it sent that
// the server has not read yet and what the server wrote that it has not read yet. The kernel's
// share would grow to megabytes per connection (TCP buffer autotuning: 4 MiB on Linux by
// default) for a client that asks for a large answer and does not read it, and the kernel
// charges it to the pod (cgroup v2). So each connection's buffers are fixed at socketBuffer each
// way, and the number of connections is bounded (door.go): in all, per client address, with the
// proxies' own share. At the bound, a connection making no progress (idle, or waiting on its
// client for its headers or its body) of the client that holds the most is closed to make room
// for a newcomer; when every connection is being answered, the newcomer waits until one closes.
// A request being answered is never cut.
//
// No phase waits on a client for longer than its bound, and no handler ever does: a door either
// refuses every request that carries a body, before any handler (HTTPLimits.MaxBody 0), or reads
// the whole body itself, up to MaxBody, in a phase of its own, and hands the handler a body in
// memory (body.go).
//
// The door also keeps HTTP's time limits, in place of net/http: net/http sets a deadline on the
// connection for each of them at every request, four timer changes per request that also wake
// the network poller whenever the new deadline is the earliest (0.4–0.7 µs of a 13 µs request
// under wrk; docs/benchmarks.md). Here each connection records when it entered its phase (a read
// of the monotonic clock and one atomic store, from the ConnState hook or the first byte of a
// next request), and one goroutine closes the connections past their phase's bound, checking
// ten times per shortest bound:
//   - headers, from accept or the first byte of a next request (a TLS handshake included);
//   - body, while the door reads a request's body;
//   - active ("answer"), from the end of the headers (or of the body) while the handler runs and
//     its answer is written;
//   - idle, between requests until a byte of the next arrives.
// A connection closed for a bound sees what net/http's deadline would have done: its read or
// write fails and net/http closes it.

// socketBuffer is the send and receive buffer of every HTTP door's connection (the kernel
// doubles it for its bookkeeping). Requests are a few KiB at most; a larger answer waits in its
// handler (where /v1 counts it in flight) instead of in the kernel.
const socketBuffer = 32 << 10

// HTTPLimits bound an HTTP listener.
type HTTPLimits struct {
	// ConnLimits bound its connections in number.
	ConnLimits
	// Headers, Body, Active and Idle bound a connection's phases.
	Headers, Body, Active, Idle time.Duration
	// MaxBody is the largest request body the door reads for its handlers, in bytes, within the
	// Body bound; a larger one is refused (BodyRefusal) before any handler. 0: the door's handlers
	// read none, and every request that carries a body is refused.
	MaxBody int64
	// BodyRefusal, when set, is the answer to a body refused; by default a plain 413.
	BodyRefusal *Refusal
	// BeforeBody, when set, is asked about a request that carries a body the door would read,
	// before it reads a byte of it: an answer it gives is sent instead (and the connection
	// closed, the body unread). For a handler that can tell from the headers alone that the
	// body is not worth reading (a signature missing).
	BeforeBody func(*http.Request) *Refusal
	// ErrorLog, when set, takes net/http's own error lines instead of the standard logger, as
	// Info lines: on an HTTPS door they are mostly failed handshakes, which are the callers' to
	// report (a caller that trusts another CA, a port scan), so give it a V(1) logger.
	ErrorLog logr.Logger
}

// DefaultHTTPLimits are the time bounds of every HTTP door; the connection and body bounds are
// each listener's. Active leaves room for the panel's longest answer, a rotation that waits for
// the operator; Body, for the largest body a door reads, sent at a modest pace.
var DefaultHTTPLimits = HTTPLimits{Headers: 5 * time.Second, Body: 5 * time.Second, Active: 30 * time.Second, Idle: 120 * time.Second}

// Behind is l with proxies as its Proxies: the peers that carry many clients' connections.
func (l HTTPLimits) Behind(proxies []netip.Prefix) HTTPLimits {
	l.Proxies = proxies
	return l
}

// MaxHeaderBlock is the most bytes a request line and its headers (CRLFs included) may take on
// every HTTP door; one byte more is answered 431 by Go's HTTP server before any handler runs.
// An API key is 57 bytes, so 8 KiB leaves room for what proxies add.
const MaxHeaderBlock = 8 << 10

// maxHeaderBytes is what makes net/http enforce MaxHeaderBlock: it reads up to MaxHeaderBytes
// + 4096 bytes ("bufio slop", net/http's initialReadLimitSize) for them.
const maxHeaderBytes = MaxHeaderBlock - 4096

var (
	httpEvicted = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_frontdoor_http_connections_evicted_total", Help: "HTTP connections not being answered that were closed to make room for a new connection at the listener's bound."})
	timedOut    = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_frontdoor_http_connections_timed_out_total", Help: "HTTP connections closed past their phase's time bound, by phase (headers, body, answer, idle)."}, []string{"phase"})
	timedOutIn  = [...]prometheus.Counter{
		phaseHeaders: timedOut.WithLabelValues("headers"),
		phaseBody:    timedOut.WithLabelValues("body"),
		phaseActive:  timedOut.WithLabelValues("answer"),
		phaseIdle:    timedOut.WithLabelValues("idle"),
	}
	bodiesRefused = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_frontdoor_http_bodies_refused_total", Help: "Requests refused before any handler because they carried a body on a listener that reads none, or one larger than it reads."})
	bodiesUnread  = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_frontdoor_http_bodies_unread_total", Help: "Requests whose body the listener could not read whole (past the body phase's bound, closed for a newcomer, or malformed); none reached a handler."})
)

// HTTP is the endpoint serving h on l within limits.
func HTTP(l net.Listener, limits HTTPLimits, h http.Handler) Endpoint {
	return HTTPS(l, limits, nil, h)
}

// HTTPS is the endpoint serving h on l within limits, over TLS with cfg (plain HTTP when cfg is
// nil). The TLS handshake is timed as part of the headers.
func HTTPS(l net.Listener, limits HTTPLimits, cfg *tls.Config, h http.Handler) Endpoint {
	setSocketBuffers(l)
	d := &httpDoor{door: newDoor(l, limits.ConnLimits, phaseHeaders), limits: limits}
	// The door keeps the time bounds itself (watch), in place of net/http's per-request deadlines.
	srv := &http.Server{ //nolint:gosec // G112: ReadHeaderTimeout is the door's Headers bound
		Handler:        newBodyGate(h, limits),
		MaxHeaderBytes: maxHeaderBytes,
		ConnState:      d.connState,
		ConnContext:    withConn,
		// HTTP/1.1 only: one request per connection at a time is what the phases time.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	if limits.ErrorLog.GetSink() != nil {
		srv.ErrorLog = stdlog.New(logWriter{limits.ErrorLog}, "", 0)
	}
	var served net.Listener = d.door
	if cfg != nil {
		// Offered h2 (controller-runtime's servers offer it), a client would speak HTTP/2 to a
		// server that answers HTTP/1.1 only.
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		served = tls.NewListener(d.door, cfg)
	}
	return Endpoint{Listener: served, server: srv, watch: d.watch}
}

// setSocketBuffers fixes the buffers of l's connections. Set on the listening socket, they are
// every accepted socket's from its first segment: a receive buffer shrunk after the handshake
// would retract the window TCP offered.
func setSocketBuffers(l net.Listener) {
	if sc, ok := l.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, socketBuffer)
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, socketBuffer)
			})
		}
	}
}

// logWriter turns net/http's error log lines into log's.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}

// A connection's phase, in the low bits of its mark; the rest is when it began, in nanoseconds
// since its door's base.
const (
	phaseHeaders = iota
	phaseBody
	phaseActive
	phaseIdle
	phaseDone // hijacked, closed, or a gRPC door's: no bound of the door's applies
	phaseBits = 3
	phaseMask = 1<<phaseBits - 1
)

// httpDoor is a door whose connections are timed in their phases.
type httpDoor struct {
	*door
	limits HTTPLimits
}

// tick is how often the bounds are checked: a connection is closed within a tick past its bound
// (later when the checking goroutine waits for a core), never before it. Phases are timed on the
// monotonic clock, not in ticks: a tick counter lags when its goroutine is late, and a phase
// marked on a lagging count was then cut short (by up to a tick, on a busy machine).
func (l HTTPLimits) tick() time.Duration {
	return max(min(l.Headers, l.Body, l.Active, l.Idle)/10, time.Millisecond)
}

// overdue says whether a connection marked mark is past its phase's bound at now (nanoseconds
// since the door's base).
func (l HTTPLimits) overdue(mark, now int64) bool {
	var bound time.Duration
	switch mark & phaseMask {
	case phaseHeaders:
		bound = l.Headers
	case phaseBody:
		bound = l.Body
	case phaseActive:
		bound = l.Active
	case phaseIdle:
		bound = l.Idle
	default:
		return false
	}
	return time.Duration(now-mark>>phaseBits) > bound
}

// connState is the http.Server's ConnState hook: it records each connection's phase, and closes
// one that turns idle while a new connection waits that may take its place. Per request it
// costs two stores to the connection's own mark and a load, no lock (a lock only while
// connections wait).
func (d *httpDoor) connState(c net.Conn, s http.ConnState) {
	dc, ok := unwrap(c).(*doorConn)
	if !ok {
		return
	}
	switch s {
	case http.StateNew:
		dc.enter(phaseHeaders)
	case http.StateActive:
		dc.enter(phaseActive)
	case http.StateIdle:
		dc.enter(phaseIdle)
		if d.idleGivesWay(dc) {
			_ = dc.Close()
		}
	default:
		dc.enter(phaseDone)
	}
}

// unwrap is the connection under c's TLS, if any.
func unwrap(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}

// watch keeps the time bounds until ctx is done: every tick it closes the connections past their
// phase's bound.
func (d *httpDoor) watch(ctx context.Context) {
	t := time.NewTicker(d.limits.tick())
	defer t.Stop()
	var overdue []*doorConn
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := int64(time.Since(d.base))
		overdue = overdue[:0]
		d.mu.Lock()
		for c := range d.conns {
			if mark := c.mark.Load(); d.limits.overdue(mark, now) {
				timedOutIn[mark&phaseMask].Inc()
				overdue = append(overdue, c)
			}
		}
		d.mu.Unlock()
		for _, c := range overdue {
			_ = c.Close()
		}
		clear(overdue)
	}
}
