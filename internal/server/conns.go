package server

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
	slots chan struct{}
	done  chan struct{}
	close sync.Once

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
}

func newConnLimiter(l net.Listener, maxConns int) *connLimiter {
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

// Accept waits for a slot, closing an idle connection when there is none, then accepts.
func (l *connLimiter) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.closeAnIdle()
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(socketBuffer)
		_ = tc.SetWriteBuffer(socketBuffer)
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

// connState is the http.Server's ConnState hook: it marks connections idle between requests.
// Per request it costs two stores to the connection's own flag, no lock.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	if lc, ok := c.(*limitedConn); ok {
		lc.idle.Store(s == http.StateIdle)
	}
}
