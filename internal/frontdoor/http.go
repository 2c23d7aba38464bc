package frontdoor

import (
	"context"
	"crypto/tls"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/frontdoor/clientaddr"
)

// The HTTP door. Each open connection costs the process memory whoever opened it and whatever
// it asked: in Go its goroutine and buffers (about 20 KiB), and in the kernel what it sent that
// the server has not read yet and what the server wrote that it has not read yet. The kernel's
// share would grow to megabytes per connection (TCP buffer autotuning: 4 MiB on Linux by
// default) for a client that asks for a large answer and does not read it, and the kernel
// charges it to the pod (cgroup v2). So each connection's buffers are fixed at socketBuffer each
// way, and the number of connections is bounded, in all and per client address. At the bound, a
// connection not being answered (idle, or still sending its headers) of the client that holds
// the most is closed to make room for a newcomer; when every connection is being answered, the
// newcomer waits in the listen queue until one closes. A request being answered is never cut.
//
// The door also keeps HTTP's time limits, in place of net/http: net/http sets a deadline on the
// connection for each of them at every request, four timer changes per request that also wake
// the network poller whenever the new deadline is the earliest (0.4–0.7 µs of a 13 µs request
// under wrk; docs/benchmarks.md). Here each connection records when it entered its phase (a read
// of the monotonic clock and one atomic store, from the ConnState hook or the first byte of a
// next request), and one goroutine closes the connections past their phase's bound, checking
// ten times per shortest bound:
//   - headers, from accept or the first byte of a next request (a TLS handshake included);
//   - active, from the end of the headers while the handler runs, any body is read and its
//     answer is written. What net/http discards of an unread body is within it;
//   - idle, between requests until a byte of the next arrives.
// A connection closed for a bound sees what net/http's deadline would have done: its read or
// write fails and net/http closes it.

// socketBuffer is the send and receive buffer of every HTTP door's connection (the kernel
// doubles it for its bookkeeping). Requests are a few KiB at most; a larger answer waits in its
// handler (where /v1 counts it in flight) instead of in the kernel.
const socketBuffer = 32 << 10

// HTTPLimits bound an HTTP listener.
type HTTPLimits struct {
	// MaxConnections bounds the listener's connections (none when ≤ 0).
	MaxConnections int
	// MaxConnectionsPerClient bounds one client address's (an IPv6 client by its /64; none when
	// ≤ 0): a connection past it is closed as it is accepted.
	MaxConnectionsPerClient int
	// Proxies are the peers that carry many clients' traffic (--trusted-proxies, gateways):
	// only MaxConnections bounds them, and their connections are closed for a newcomer only
	// when idle.
	Proxies []netip.Prefix
	// Headers, Active and Idle bound a connection's phases.
	Headers, Active, Idle time.Duration
	// RefuseBodies, when set, answers a request that carries a body, before any handler, and
	// closes its connection: for a listener whose handlers read none (net/http would read up to
	// 256 KiB of it, for as long as the client takes, before answering).
	RefuseBodies *Refusal
	// ErrorLog, when set, takes net/http's own error lines instead of the standard logger, as
	// Info lines: on an HTTPS door they are mostly failed handshakes, which are the callers' to
	// report (a caller that trusts another CA, a port scan), so give it a V(1) logger.
	ErrorLog logr.Logger
}

// DefaultHTTPLimits are the time bounds of every HTTP door; the connection bounds are each
// listener's. Active leaves room for the panel's longest answer, a rotation that waits for the
// operator.
var DefaultHTTPLimits = HTTPLimits{Headers: 5 * time.Second, Active: 30 * time.Second, Idle: 120 * time.Second}

// Refusal is an answer a door writes itself, before any handler.
type Refusal struct {
	Status int
	// Header holds the answer's header fields but for Content-Length and Connection.
	Header http.Header
	Body   []byte
}

// MaxHeaderBlock is the most bytes a request line and its headers (CRLFs included) may take on
// every HTTP door; one byte more is answered 431 by Go's HTTP server before any handler runs.
// An API key is 57 bytes, so 8 KiB leaves room for what proxies add.
const MaxHeaderBlock = 8 << 10

// maxHeaderBytes is what makes net/http enforce MaxHeaderBlock: it reads up to MaxHeaderBytes
// + 4096 bytes ("bufio slop", net/http's initialReadLimitSize) for them.
const maxHeaderBytes = MaxHeaderBlock - 4096

var (
	httpEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_frontdoor_http_connections_evicted_total",
		Help: "HTTP connections not being answered that were closed to make room for a new connection at the listener's bound.",
	})
	timedOut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_frontdoor_http_connections_timed_out_total",
		Help: "HTTP connections closed past their phase's time bound, by phase (headers, answer, idle).",
	}, []string{"phase"})
	timedOutIn = [...]prometheus.Counter{
		phaseHeaders: timedOut.WithLabelValues("headers"),
		phaseActive:  timedOut.WithLabelValues("answer"),
		phaseIdle:    timedOut.WithLabelValues("idle"),
	}
	bodiesRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_frontdoor_http_bodies_refused_total",
		Help: "Requests refused before any handler because they carried a body on a listener that reads none.",
	})
)

// HTTP is the endpoint serving h on l within limits.
func HTTP(l net.Listener, limits HTTPLimits, h http.Handler) Endpoint {
	return HTTPS(l, limits, nil, h)
}

// HTTPS is the endpoint serving h on l within limits, over TLS with cfg (plain HTTP when cfg is
// nil). The TLS handshake is timed as part of the headers.
func HTTPS(l net.Listener, limits HTTPLimits, cfg *tls.Config, h http.Handler) Endpoint {
	d := newHTTPDoor(l, limits)
	if limits.RefuseBodies != nil {
		h = refuseBodies(h, limits.RefuseBodies)
	}
	// The door keeps the time bounds itself (watch), in place of net/http's per-request deadlines.
	srv := &http.Server{ //nolint:gosec // G112: ReadHeaderTimeout is the door's Headers bound
		Handler:        h,
		MaxHeaderBytes: maxHeaderBytes,
		ConnState:      d.connState,
		// HTTP/1.1 only: one request per connection at a time is what the phases time.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	if limits.ErrorLog.GetSink() != nil {
		srv.ErrorLog = stdlog.New(logWriter{limits.ErrorLog}, "", 0)
	}
	var served net.Listener = d
	if cfg != nil {
		// Offered h2 (controller-runtime's servers offer it), a client would speak HTTP/2 to a
		// server that answers HTTP/1.1 only.
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		served = tls.NewListener(d, cfg)
	}
	return Endpoint{Listener: served, server: srv, watch: d.watch}
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
	phaseActive
	phaseIdle
	phaseDone // hijacked or closed: no bound of the door's applies
	phaseBits = 2
	phaseMask = 1<<phaseBits - 1
)

// tick is how often the bounds are checked: a connection is closed within a tick past its bound
// (later when the checking goroutine waits for a core), never before it. Phases are timed on the
// monotonic clock, not in ticks: a tick counter lags when its goroutine is late, and a phase
// marked on a lagging count was then cut short (by up to a tick, on a busy machine).
func (l HTTPLimits) tick() time.Duration {
	return max(min(l.Headers, l.Active, l.Idle)/10, time.Millisecond)
}

// overdue says whether a connection marked mark is past its phase's bound at now (nanoseconds
// since the door's base).
func (l HTTPLimits) overdue(mark, now int64) bool {
	var bound time.Duration
	switch mark & phaseMask {
	case phaseHeaders:
		bound = l.Headers
	case phaseActive:
		bound = l.Active
	case phaseIdle:
		bound = l.Idle
	default:
		return false
	}
	return time.Duration(now-mark>>phaseBits) > bound
}

// httpDoor is a listener with its connections bounded in number (when slots is not nil), per
// client, and in time.
type httpDoor struct {
	net.Listener
	limits  HTTPLimits
	slots   chan struct{}
	shares  *clientShares
	done    chan struct{}
	close   sync.Once
	waiting atomic.Int32 // Accept calls waiting for a slot
	base    time.Time    // phases are timed from it, on the monotonic clock

	mu    sync.Mutex
	conns map[*doorConn]struct{}
}

func newHTTPDoor(l net.Listener, limits HTTPLimits) *httpDoor {
	// Set on the listening socket, the buffers are every accepted socket's from its first
	// segment: a receive buffer shrunk after the handshake would retract the window TCP offered.
	if sc, ok := l.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, socketBuffer)
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, socketBuffer)
			})
		}
	}
	d := &httpDoor{Listener: l, limits: limits, shares: newClientShares(limits.MaxConnectionsPerClient),
		base: time.Now(), done: make(chan struct{}), conns: map[*doorConn]struct{}{}}
	if limits.MaxConnections > 0 {
		d.slots = make(chan struct{}, limits.MaxConnections)
	}
	return d
}

// doorConn is an accepted connection; closing it frees its slot and its client's share.
type doorConn struct {
	net.Conn
	d       *httpDoor
	client  netip.Addr
	proxy   bool         // a peer of limits.Proxies: counted in all only
	mark    atomic.Int64 // phase and when it began
	release sync.Once
}

// phase is the connection's phase now.
func (c *doorConn) phase() int64 { return c.mark.Load() & phaseMask }

func (c *doorConn) enter(phase int64) {
	c.mark.Store(int64(time.Since(c.d.base))<<phaseBits | phase)
}

// Read notes the first byte of a next request: the idle phase ends and the headers' begins.
func (c *doorConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.phase() == phaseIdle {
		c.enter(phaseHeaders)
	}
	return n, err
}

func (c *doorConn) Close() error {
	c.release.Do(func() {
		c.d.mu.Lock()
		delete(c.d.conns, c)
		c.d.mu.Unlock()
		if !c.proxy {
			c.d.shares.give(c.client)
		}
		if c.d.slots != nil {
			<-c.d.slots
		}
	})
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as net/http does after an error it answers before any
// handler (431): the client reads the answer to its end instead of a reset.
func (c *doorConn) CloseWrite() error { return CloseWrite(c.Conn) }

// Accept accepts a connection whose client is within its share, then waits for a slot for it:
// at the bound it makes room (evict), and else waits until a connection closes (further
// clients wait in the listen queue).
func (d *httpDoor) Accept() (net.Conn, error) {
	for {
		c, err := d.Listener.Accept()
		if err != nil {
			return nil, err
		}
		dc := &doorConn{Conn: c, d: d}
		peer := clientaddr.Parse(c.RemoteAddr().String())
		if dc.proxy = clientaddr.Trusted(peer, d.limits.Proxies); !dc.proxy {
			dc.client = clientaddr.Bucket(peer)
			if !d.shares.take(dc.client) {
				connRefused.Inc()
				_ = c.Close()
				continue
			}
		}
		if err := d.takeSlot(dc); err != nil {
			if !dc.proxy {
				d.shares.give(dc.client)
			}
			_ = c.Close()
			return nil, err
		}
		dc.enter(phaseHeaders)
		d.mu.Lock()
		d.conns[dc] = struct{}{}
		d.mu.Unlock()
		return dc, nil
	}
}

// takeSlot takes a slot for newcomer, making room at the bound; it fails only when the door is
// closed.
func (d *httpDoor) takeSlot(newcomer *doorConn) error {
	if d.slots == nil {
		return nil
	}
	select {
	case d.slots <- struct{}{}:
		return nil
	default:
	}
	// While this waits, a connection that turns idle is closed at once (connState).
	d.waiting.Add(1)
	defer d.waiting.Add(-1)
	d.evict(newcomer)
	select {
	case d.slots <- struct{}{}:
		return nil
	case <-d.done:
		return net.ErrClosed
	}
}

// Close stops Accept, also while it waits for a slot.
func (d *httpDoor) Close() error {
	d.close.Do(func() { close(d.done) })
	return d.Listener.Close()
}

// evict closes one connection not being answered, to make room for newcomer: an idle one, or
// one still sending its headers whose client holds more than newcomer's would with it; of the
// client holding the most, the one that has waited longest. A proxy's only when idle, and after
// every client's. Its client sees what a keep-alive or header timeout looks like.
func (d *httpDoor) evict(newcomer *doorConn) {
	d.mu.Lock()
	victim := pickVictim(d.conns, newcomer)
	d.mu.Unlock()
	if victim != nil {
		httpEvicted.Inc()
		_ = victim.Close()
	}
}

// pickVictim is evict's choice among conns for newcomer (nil: none may give way, and newcomer
// waits for a connection to close).
func pickVictim(conns map[*doorConn]struct{}, newcomer *doorConn) *doorConn {
	held := make(map[netip.Addr]int)
	for c := range conns {
		if !c.proxy {
			held[c.client]++
		}
	}
	// What newcomer's client would hold: a client's connection that is still sending its
	// headers gives way only to a newcomer of a client that would hold fewer.
	would := 0
	if !newcomer.proxy {
		would = held[newcomer.client] + 1
	}
	var victim *doorConn
	var victimMark int64
	better := func(c *doorConn, mark int64) bool {
		switch {
		case victim == nil:
			return true
		case c.proxy != victim.proxy:
			return !c.proxy
		case !c.proxy && held[c.client] != held[victim.client]:
			return held[c.client] > held[victim.client]
		}
		return mark>>phaseBits < victimMark>>phaseBits // waited longest
	}
	for c := range conns {
		mark := c.mark.Load()
		switch phase := mark & phaseMask; {
		case phase == phaseIdle, phase == phaseHeaders && !c.proxy && held[c.client] > would:
			if better(c, mark) {
				victim, victimMark = c, mark
			}
		}
	}
	return victim
}

// connState is the http.Server's ConnState hook: it records each connection's phase, and closes
// one that turns idle while a new connection waits for a slot. Per request it costs two stores
// to the connection's own mark and a load, no lock.
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
		if d.waiting.Load() > 0 {
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

// refuseBodies answers a request that carries a body with refusal, before h, and closes the
// connection without reading the body: the connection is hijacked from net/http, which would
// otherwise read up to 256 KiB of the body first, for as long as the client takes.
func refuseBodies(h http.Handler, refusal *Refusal) http.Handler {
	head := []byte(fmt.Sprintf("HTTP/1.1 %d %s\r\n", refusal.Status, http.StatusText(refusal.Status)))
	var fields []byte
	for name, values := range refusal.Header {
		for _, v := range values {
			fields = fmt.Appendf(fields, "%s: %s\r\n", name, v)
		}
	}
	answer := append(append(head, fields...), "Content-Length: "+strconv.Itoa(len(refusal.Body))+"\r\nConnection: close\r\n\r\n"...)
	answer = append(answer, refusal.Body...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
			h.ServeHTTP(w, r)
			return
		}
		bodiesRefused.Inc()
		hj, ok := w.(http.Hijacker)
		if !ok { // not HTTP/1: refuse in the answer, and ask for the connection to close
			for name, values := range refusal.Header {
				w.Header()[name] = values
			}
			w.Header().Set("Connection", "close")
			w.WriteHeader(refusal.Status)
			_, _ = w.Write(refusal.Body)
			return
		}
		c, buf, err := hj.Hijack()
		if err != nil {
			return
		}
		_, _ = buf.Write(answer)
		_ = buf.Flush()
		// Answered, it lingers half-closed: the first to give way at the bound.
		if dc, ok := unwrap(c).(*doorConn); ok {
			dc.enter(phaseIdle)
		}
		closeAfterAnswer(c)
	})
}

// closeAfterAnswer half-closes c, then closes it once the client has closed its side or after
// a short while: closed at once with the unread body in its receive buffer, the kernel would
// reset the connection, and the client could lose the answer (net/http waits the same way).
func closeAfterAnswer(c net.Conn) {
	_ = CloseWrite(c)
	time.AfterFunc(rstAvoidanceDelay, func() { _ = c.Close() })
}

// rstAvoidanceDelay is how long a refused connection stays half-closed (net/http's own value).
const rstAvoidanceDelay = 500 * time.Millisecond
