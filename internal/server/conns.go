package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/httpserve"
)

// The API listener's connections. Each open connection costs the replica memory whoever opened
// it and whatever it asked: in Go its goroutine and buffers (about 20 KiB), and in the kernel
// what it sent that the server has not read yet and what the server wrote that it has not read
// yet. The kernel's share would grow to megabytes per connection (TCP buffer autotuning: 4 MiB
// on Linux by default) for a client that asks for a large list and does not read it, and the
// kernel charges it to the pod (cgroup v2). So each connection's buffers are fixed at
// socketBuffer each way, and the number of connections is bounded (--max-connections): at the
// bound, an idle keep-alive connection is closed to make room for a new one, and when none is
// idle, new connections wait in the listen queue until one closes.
//
// The listener also keeps HTTP's time limits (httpserve's), in place of net/http: net/http sets
// a deadline on the connection for each of them at every request, four timer changes per request
// that also wake the network poller whenever the new deadline is the earliest (0.4–0.7 µs of a
// 13 µs request under wrk; docs/benchmarks.md). Here each connection records when it entered its
// phase (a read of the monotonic clock and one atomic store, from the ConnState hook or the first
// byte of a next request), and one goroutine closes the connections past their phase's bound,
// checking ten times per shortest bound:
//   - headers, from accept or the first byte of a next request: ReadHeaderTimeout;
//   - active, from the end of the headers while the handler runs and its answer is written:
//     WriteTimeout. The API's handlers read no body; what net/http discards of one is within it;
//   - idle, between requests until a byte of the next arrives: IdleTimeout.
// A connection closed for a bound sees what net/http's deadline would have done: its read or
// write fails and net/http closes it.

// socketBuffer is the send and receive buffer of every API connection (the kernel doubles it
// for its bookkeeping). Requests are a few KiB at most; a response larger than this waits in its
// handler, where it is counted in flight (list.go), instead of in the kernel.
const socketBuffer = 32 << 10

// connLimits are the time bounds of a connection's phases.
type connLimits struct {
	headers, active, idle time.Duration
}

// apiConnLimits are the API listener's: those of every switchboard listener.
var apiConnLimits = connLimits{headers: httpserve.ReadHeaderTimeout, active: httpserve.WriteTimeout, idle: httpserve.IdleTimeout}

// tick is how often the bounds are checked: a connection is closed within a tick past its bound
// (later when the checking goroutine waits for a core), never before it. Phases are timed on the
// monotonic clock, not in ticks: a tick counter lags when its goroutine is late, and a phase
// marked on a lagging count was then cut short (by up to a tick, on a busy machine).
func (c connLimits) tick() time.Duration {
	return max(min(c.headers, c.active, c.idle)/10, time.Millisecond)
}

// A connection's phase, in the low bits of its mark; the rest is when it began, in nanoseconds
// since its listener's base.
const (
	phaseHeaders = iota
	phaseActive
	phaseIdle
	phaseDone // hijacked or closed: no bound of the listener's applies
	phaseBits = 2
	phaseMask = 1<<phaseBits - 1
)

// overdue says whether a connection marked mark is past its phase's bound at now (nanoseconds
// since the listener's base).
func (c connLimits) overdue(mark, now int64) bool {
	var bound time.Duration
	switch mark & phaseMask {
	case phaseHeaders:
		bound = c.headers
	case phaseActive:
		bound = c.active
	case phaseIdle:
		bound = c.idle
	default:
		return false
	}
	return time.Duration(now-mark>>phaseBits) > bound
}

// connLimiter is the API listener with its connections bounded in number (when slots is not
// nil) and in time.
type connLimiter struct {
	net.Listener
	limits  connLimits
	slots   chan struct{}
	done    chan struct{}
	close   sync.Once
	waiting atomic.Int32 // Accept calls waiting for a slot
	base    time.Time    // phases are timed from it, on the monotonic clock

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
}

// newConnLimiter bounds l's connections to maxConns (none when maxConns ≤ 0) and to limits; its
// time bounds hold while watch runs.
func newConnLimiter(l net.Listener, maxConns int, limits connLimits) *connLimiter {
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
	cl := &connLimiter{Listener: l, limits: limits, base: time.Now(), done: make(chan struct{}), conns: map[*limitedConn]struct{}{}}
	if maxConns > 0 {
		cl.slots = make(chan struct{}, maxConns)
	}
	return cl
}

// limitedConn is an accepted connection; closing it frees its slot.
type limitedConn struct {
	net.Conn
	l       *connLimiter
	mark    atomic.Int64 // phase and when it began
	release sync.Once
}

// phase is the connection's phase now.
func (c *limitedConn) phase() int64 { return c.mark.Load() & phaseMask }

func (c *limitedConn) enter(phase int64) {
	c.mark.Store(int64(time.Since(c.l.base))<<phaseBits | phase)
}

// Read notes the first byte of a next request: the idle phase ends and the headers' begins.
func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.phase() == phaseIdle {
		c.enter(phaseHeaders)
	}
	return n, err
}

func (c *limitedConn) Close() error {
	c.release.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		if c.l.slots != nil {
			<-c.l.slots
		}
	})
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as net/http does after an error it answers before any
// handler (431): the client reads the answer to its end instead of a reset.
func (c *limitedConn) CloseWrite() error { return frontdoor.CloseWrite(c.Conn) }

// Accept accepts a connection, then waits for a slot for it: at the bound it closes an idle
// connection, and else waits until one closes (further clients wait in the listen queue).
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
		default:
			// While this waits, a connection that turns idle is closed at once (connState).
			l.waiting.Add(1)
			l.closeAnIdle()
			select {
			case l.slots <- struct{}{}:
				l.waiting.Add(-1)
			case <-l.done:
				l.waiting.Add(-1)
				_ = c.Close()
				return nil, net.ErrClosed
			}
		}
	}
	lc := &limitedConn{Conn: c, l: l}
	lc.enter(phaseHeaders)
	l.mu.Lock()
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	return lc, nil
}

// Close stops Accept, also while it waits for a slot.
func (l *connLimiter) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// closeAnIdle closes one connection that is between requests, if there is one. Its client sees
// what a keep-alive timeout looks like, and reconnects.
func (l *connLimiter) closeAnIdle() {
	l.mu.Lock()
	var victim *limitedConn
	for c := range l.conns {
		if c.phase() == phaseIdle {
			victim = c
			break
		}
	}
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Close()
	}
}

// connState is the http.Server's ConnState hook: it records each connection's phase, and closes
// one that turns idle while a new connection waits for a slot. Per request it costs two stores
// to the connection's own mark and a load, no lock.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch s {
	case http.StateNew:
		lc.enter(phaseHeaders)
	case http.StateActive:
		lc.enter(phaseActive)
	case http.StateIdle:
		lc.enter(phaseIdle)
		if l.waiting.Load() > 0 {
			_ = lc.Close()
		}
	default:
		lc.enter(phaseDone)
	}
}

// watch keeps the time bounds until ctx is done: every tick it advances the phase clock and
// closes the connections past their phase's bound.
func (l *connLimiter) watch(ctx context.Context) {
	t := time.NewTicker(l.limits.tick())
	defer t.Stop()
	var overdue []*limitedConn
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := int64(time.Since(l.base))
		overdue = overdue[:0]
		l.mu.Lock()
		for c := range l.conns {
			if l.limits.overdue(c.mark.Load(), now) {
				overdue = append(overdue, c)
			}
		}
		l.mu.Unlock()
		for _, c := range overdue {
			_ = c.Close()
		}
		clear(overdue)
	}
}
