package frontdoor

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/metrics"
)

// The admission of connections, shared by the HTTP and the gRPC doors. A door counts its
// connections in two pools: the proxies' own (ConnLimits.ProxyConnections, for the peers that
// carry many clients' traffic: an ingress, a gateway) and the rest, which every peer shares. One
// client address holds at most its share of the rest. A connection past its client's share is
// closed as it is accepted; one that finds its pool full waits (parked: a file descriptor and a
// goroutine, no buffers) while the loop goes on accepting, so that a full pool never keeps a
// proxy, or a client within its share, out of a pool with room. What waits is bounded too: past
// as many waiting as the shared pool holds, a newcomer is closed at once.

// ConnLimits bound a door's connections in number.
type ConnLimits struct {
	// MaxConnections bounds the door's connections, proxies' and clients' together (none when
	// ≤ 0).
	MaxConnections int
	// MaxConnectionsPerClient bounds one client address's (an IPv6 client by its /64; none when
	// ≤ 0): a connection past it is closed as it is accepted. Proxies are not bounded by it.
	MaxConnectionsPerClient int
	// Proxies are the peers that carry many clients' traffic (--trusted-proxies, named
	// gateways): only MaxConnections bounds them, and their connections are closed for a
	// newcomer only when idle.
	Proxies []netip.Prefix
	// ProxyConnections of MaxConnections are kept for Proxies, when there are any: other
	// clients hold at most MaxConnections − ProxyConnections together. Proxies take these
	// first, then the rest.
	ProxyConnections int
}

// WithBounds is l bounded at all connections (none when ≤ 0) and perClient of one client,
// keeping for proxies the same part of all as l did.
func (l ConnLimits) WithBounds(all, perClient int) ConnLimits {
	if l.MaxConnections > 0 && all > 0 {
		l.ProxyConnections = l.ProxyConnections * all / l.MaxConnections
	}
	l.MaxConnections, l.MaxConnectionsPerClient = all, perClient
	return l
}

// reserved is how many of the door's connections are kept for its proxies: none when it names
// none.
func (l ConnLimits) reserved() int {
	if len(l.Proxies) == 0 || l.MaxConnections <= 0 {
		return 0
	}
	return min(max(l.ProxyConnections, 0), l.MaxConnections)
}

var (
	// connRefused counts the connections closed at accept because their client held its share.
	connRefused = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_frontdoor_client_connections_refused_total", Help: "Connections closed as they were accepted because their client address already held its share of the listener's connections."})
	// connTurnedAway counts the connections closed at accept because too many waited already.
	connTurnedAway = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_frontdoor_connections_turned_away_total", Help: "Connections closed as they were accepted because the listener was full and as many connections as it holds were waiting already."})
)

// door is a listener whose connections are bounded in number: in all, per client, with the
// proxies' own share. The HTTP door adds phases and their time bounds (http.go); a gRPC door's
// connections have none (firstPhase phaseDone), grpc-go keeps their time.
type door struct {
	net.Listener
	limits     ConnLimits
	shared     chan struct{} // slots every peer may take; nil: no bound in all
	reserve    chan struct{} // slots only proxies take; nil: none
	shares     *clientShares
	firstPhase int64
	base       time.Time // phases are timed from it, on the monotonic clock

	accepted  chan *doorConn // admitted, for Accept
	failed    chan error     // the listener's Accept errors, for Accept
	done      chan struct{}
	closeOnce sync.Once
	startOnce sync.Once
	waiting   atomic.Int32 // connections waiting for a slot

	mu    sync.Mutex
	conns map[*doorConn]struct{}
	// The clients of the connections waiting, and how many of them are proxies': an idle
	// connection closes for a waiting one only if that one's client may take its place.
	waiters      map[netip.Addr]int
	proxyWaiters int
}

func newDoor(l net.Listener, limits ConnLimits, firstPhase int64) *door {
	d := &door{Listener: l, limits: limits, shares: newClientShares(limits.MaxConnectionsPerClient), firstPhase: firstPhase,
		base: time.Now(), accepted: make(chan *doorConn), failed: make(chan error), done: make(chan struct{}),
		conns: map[*doorConn]struct{}{}, waiters: map[netip.Addr]int{}}
	if limits.MaxConnections > 0 {
		d.shared = make(chan struct{}, limits.MaxConnections-limits.reserved())
		if limits.reserved() > 0 {
			d.reserve = make(chan struct{}, limits.reserved())
		}
	}
	return d
}

// bound bounds l's connections within limits, for a server that keeps their time itself
// (gRPC). A connection past its client's share is closed at once; one that finds the door full
// waits, as parked, until another closes.
func bound(l net.Listener, limits ConnLimits) net.Listener {
	return newDoor(l, limits, phaseDone)
}

// doorConn is an accepted connection; closing it frees its slot and its client's share.
type doorConn struct {
	net.Conn
	d        *door
	client   netip.Addr
	proxy    bool         // a peer of limits.Proxies: not counted per client
	reserved bool         // holds one of the proxies' own slots
	mark     atomic.Int64 // phase and when it began
	release  sync.Once
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
		c.d.free(c)
	})
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as net/http does after an error it answers before any
// handler (431): the client reads the answer to its end instead of a reset.
func (c *doorConn) CloseWrite() error { return CloseWrite(c.Conn) }

// CloseWrite half-closes c when it can (a TCP connection, or one wrapping it): a wrapper of a
// connection that net/http serves must keep this, or net/http resets where it meant to close.
func CloseWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Accept returns the next connection admitted. The door's own loop accepts from the listener
// (started by the first call), so that a connection waiting for a slot holds up no other.
func (d *door) Accept() (net.Conn, error) {
	d.startOnce.Do(func() { go d.admitLoop() })
	select {
	case c := <-d.accepted:
		return c, nil
	case err := <-d.failed:
		return nil, err
	case <-d.done:
		return nil, net.ErrClosed
	}
}

// admitLoop accepts until the listener fails for good, admitting each connection at once or
// parking it.
func (d *door) admitLoop() {
	for {
		c, err := d.Listener.Accept()
		if err != nil {
			select {
			case d.failed <- err:
			case <-d.done:
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				continue // the server backs off and asks again
			}
			return
		}
		d.admit(c)
	}
}

// admit counts c against its client's share and takes a slot for it, or parks it until one
// frees; the connection goes to Accept once it holds a slot.
func (d *door) admit(c net.Conn) {
	dc := &doorConn{Conn: c, d: d}
	peer := clientaddr.Parse(c.RemoteAddr().String())
	if dc.proxy = clientaddr.Trusted(peer, d.limits.Proxies); !dc.proxy {
		dc.client = clientaddr.Bucket(peer)
		if !d.shares.take(dc.client) {
			connRefused.Inc()
			_ = c.Close()
			return
		}
	}
	// A newcomer takes a free slot only when none waits: a slot freed for a waiting connection
	// (its victim closed) is that connection's.
	if d.waiting.Load() == 0 && d.trySlot(dc) {
		d.hand(dc)
		return
	}
	if int(d.waiting.Load()) >= cap(d.shared) {
		connTurnedAway.Inc()
		d.forget(dc)
		_ = c.Close()
		return
	}
	d.wait(dc, 1)
	d.evict(dc)
	go d.await(dc)
}

// wait counts c among the connections waiting (by +1), or no more (by −1).
func (d *door) wait(c *doorConn, by int32) {
	d.mu.Lock()
	if c.proxy {
		d.proxyWaiters += int(by)
	} else if d.waiters[c.client] += int(by); d.waiters[c.client] <= 0 {
		delete(d.waiters, c.client)
	}
	d.mu.Unlock()
	d.waiting.Add(by)
}

// idleGivesWay says whether c, turning idle, should close for a connection waiting: one of its
// own client's, a proxy's, or one of a client that holds no more than c's does (pickVictim's
// rule for idle connections).
func (d *door) idleGivesWay(c *doorConn) bool {
	if c.reserved || d.waiting.Load() == 0 {
		return false
	}
	if c.proxy {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.proxyWaiters > 0 || d.waiters[c.client] > 0 {
		return true
	}
	mine := d.shares.count(c.client)
	for w := range d.waiters {
		if d.shares.count(w) <= mine {
			return true
		}
	}
	return false
}

// trySlot takes a slot for c if one is free: a proxy's own first.
func (d *door) trySlot(c *doorConn) bool {
	if d.shared == nil {
		return true
	}
	if c.proxy && d.reserve != nil {
		select {
		case d.reserve <- struct{}{}:
			c.reserved = true
			return true
		default:
		}
	}
	select {
	case d.shared <- struct{}{}:
		return true
	default:
		return false
	}
}

// await waits for a slot for c (parked), then hands it to Accept.
func (d *door) await(c *doorConn) {
	var reserve chan struct{} // nil: never ready
	if c.proxy {
		reserve = d.reserve
	}
	select {
	case d.shared <- struct{}{}:
	case reserve <- struct{}{}:
		c.reserved = true
	case <-d.done:
		d.wait(c, -1)
		d.forget(c)
		_ = c.Conn.Close()
		return
	}
	d.wait(c, -1)
	d.hand(c)
}

// hand registers c, which holds a slot, and gives it to Accept.
func (d *door) hand(c *doorConn) {
	c.enter(d.firstPhase)
	d.mu.Lock()
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	select {
	case d.accepted <- c:
	case <-d.done:
		_ = c.Close()
	}
}

// free gives back c's slot and its client's share.
func (d *door) free(c *doorConn) {
	d.forget(c)
	switch {
	case d.shared == nil:
	case c.reserved:
		<-d.reserve
	default:
		<-d.shared
	}
}

// forget gives back c's share of its client.
func (d *door) forget(c *doorConn) {
	if !c.proxy {
		d.shares.give(c.client)
	}
}

// Close stops Accept and the connections waiting for a slot.
func (d *door) Close() error {
	d.closeOnce.Do(func() { close(d.done) })
	return d.Listener.Close()
}

// SyscallConn is the listening socket's, when l's is reachable (a listener above sets socket
// options through it).
func (d *door) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := d.Listener.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// evict closes one connection not making progress, to make room for newcomer: one waiting on
// its client (its headers, its body) whose client holds more than newcomer's would with it, or
// an idle one whose client holds at least as many (or is newcomer's own); of the client holding
// the most, the one that has waited longest. A proxy's only when idle, and after every client's.
// Its client sees what a keep-alive or header timeout looks like. An idle keep-alive connection
// closed just as its client sends on it fails that request (a POST is not retried), so a client
// holding fewer never loses one to a bigger holder's newcomer: the API server calling the
// admission webhook does not lose its connections to an attacker's. A gRPC door's connections
// have no phase and never give way.
func (d *door) evict(newcomer *doorConn) {
	d.mu.Lock()
	victim := pickVictim(d.conns, newcomer)
	d.mu.Unlock()
	if victim != nil {
		httpEvicted.Inc()
		_ = victim.Close()
	}
}

// pickVictim is evict's choice among conns for newcomer (nil: none may give way, and newcomer
// waits for a connection to close). A connection holding a proxy's own slot gives way only to
// a proxy: its slot would be of no use to anyone else.
func pickVictim(conns map[*doorConn]struct{}, newcomer *doorConn) *doorConn {
	held := make(map[netip.Addr]int)
	for c := range conns {
		if !c.proxy {
			held[c.client]++
		}
	}
	// What newcomer's client would hold: a client's connection that waits on its client gives
	// way only to a newcomer of a client that would hold fewer.
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
		if c.reserved && !newcomer.proxy {
			continue
		}
		mark := c.mark.Load()
		switch phase := mark & phaseMask; {
		case phase == phaseIdle && (c.proxy || newcomer.proxy || held[c.client] >= would || c.client == newcomer.client),
			(phase == phaseHeaders || phase == phaseBody) && !c.proxy && held[c.client] > would:
			if better(c, mark) {
				victim, victimMark = c, mark
			}
		}
	}
	return victim
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

// count is how many client holds.
func (s *clientShares) count(client netip.Addr) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[client]
}

// give counts one less for client, forgetting a client that holds nothing.
func (s *clientShares) give(client netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[client]--; s.held[client] <= 0 {
		delete(s.held, client)
	}
}
