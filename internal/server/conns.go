package server

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
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

// socketBuffer is the send and receive buffer of every API connection (the kernel doubles it
// for its bookkeeping). Requests are a few KiB at most; a response larger than this waits in its
// handler, where it is counted in flight (list.go), instead of in the kernel.
const socketBuffer = 32 << 10

// connLimiter is the API listener with its connections bounded.
type connLimiter struct {
	net.Listener
	slots   chan struct{}
	done    chan struct{}
	close   sync.Once
	waiting atomic.Int32 // Accept calls waiting for a slot

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
}

func newConnLimiter(l net.Listener, maxConns int) *connLimiter {
	// Set on the listening socket, the buffers are every accepted socket's from its first
	// segment: a receive buffer shrunk after the handshake would retract the window TCP offered.
	if tl, ok := l.(*net.TCPListener); ok {
		if rc, err := tl.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, socketBuffer)
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, socketBuffer)
			})
		}
	}
	return &connLimiter{Listener: l, slots: make(chan struct{}, maxConns), done: make(chan struct{}), conns: map[*limitedConn]struct{}{}}
}

// limitedConn is an accepted connection; closing it frees its slot.
type limitedConn struct {
	net.Conn
	l       *connLimiter
	idle    atomic.Bool
	release sync.Once
}

func (c *limitedConn) Close() error {
	c.release.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as net/http does after an error it answers before any
// handler (431): the client reads the answer to its end instead of a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Accept accepts a connection, then waits for a slot for it: at the bound it closes an idle
// connection, and else waits until one closes (further clients wait in the listen queue).
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
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
	lc := &limitedConn{Conn: c, l: l}
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
		if c.idle.Load() {
			victim = c
			break
		}
	}
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Close()
	}
}

// connState is the http.Server's ConnState hook: it marks connections idle between requests,
// and closes one that turns idle while a new connection waits for a slot. Per request it costs
// two stores to the connection's own flag and a load, no lock.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	idle := s == http.StateIdle
	lc.idle.Store(idle)
	if idle && l.waiting.Load() > 0 {
		_ = lc.Close()
	}
}
