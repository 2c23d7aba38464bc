package frontdoor

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/frontdoor/clientaddr"
)

// connRefused counts the connections closed at accept because their client held its share.
var connRefused = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "switchboard_frontdoor_client_connections_refused_total",
	Help: "Connections closed as they were accepted because their client address already held its share of the listener's connections.",
})

// Listener bounds l's connections: at most max at once (none when max ≤ 0), and perClient of
// one client address (none when perClient ≤ 0; an IPv6 client by its /64), but for peers in
// exempt, the proxies and gateways that carry many clients' traffic, which only max bounds. A connection past its
// client's bound is closed at once; one past max waits in the listen queue until another closes.
// The server behind it keeps the time bounds.
func Listener(l net.Listener, max, perClient int, exempt ...netip.Prefix) net.Listener {
	bl := &boundedListener{Listener: l, shares: newClientShares(perClient), exempt: exempt, done: make(chan struct{})}
	if max > 0 {
		bl.slots = make(chan struct{}, max)
	}
	return bl
}

type boundedListener struct {
	net.Listener
	slots     chan struct{} // nil: no bound in all
	shares    *clientShares
	exempt    []netip.Prefix
	done      chan struct{}
	closeOnce sync.Once
}

// Accept waits for a free slot, then for a connection whose client is within its bound.
func (l *boundedListener) Accept() (net.Conn, error) {
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if l.slots != nil {
				<-l.slots
			}
			return nil, err
		}
		peer := clientaddr.Parse(c.RemoteAddr().String())
		if clientaddr.Trusted(peer, l.exempt) {
			return &boundedConn{Conn: c, l: l, exempt: true}, nil
		}
		client := clientaddr.Bucket(peer)
		if l.shares.take(client) {
			return &boundedConn{Conn: c, l: l, client: client}, nil
		}
		connRefused.Inc()
		_ = c.Close()
	}
}

// SyscallConn is the listening socket's, when l's is reachable (a listener above sets socket
// options through it).
func (l *boundedListener) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := l.Listener.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// Close stops Accept, also while it waits for a slot.
func (l *boundedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type boundedConn struct {
	net.Conn
	l      *boundedListener
	client netip.Addr
	exempt bool // counted in all only
	once   sync.Once
}

func (c *boundedConn) Close() error {
	c.once.Do(func() {
		if !c.exempt {
			c.l.shares.give(c.client)
		}
		if c.l.slots != nil {
			<-c.l.slots
		}
	})
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as net/http does after an error it answers before any
// handler: the client reads the answer to its end instead of a reset.
func (c *boundedConn) CloseWrite() error { return CloseWrite(c.Conn) }

// CloseWrite half-closes c when it can (a TCP connection, or one wrapping it): a wrapper of a
// connection that net/http serves must keep this, or net/http resets where it meant to close.
func CloseWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// clientShares counts what each client address holds of something bounded per client (a
// listener's connections, a gRPC door's calls), so that one client cannot hold more than limit.
type clientShares struct {
	mu    sync.Mutex
	limit int // ≤ 0: no bound
	held  map[netip.Addr]int
}

func newClientShares(limit int) *clientShares {
	return &clientShares{limit: limit, held: map[netip.Addr]int{}}
}

// take counts one more for client, or says false when it holds its share already.
func (s *clientShares) take(client netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit > 0 && s.held[client] >= s.limit {
		return false
	}
	s.held[client]++
	return true
}

// give counts one less for client, forgetting a client that holds nothing.
func (s *clientShares) give(client netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[client]--; s.held[client] <= 0 {
		delete(s.held, client)
	}
}
