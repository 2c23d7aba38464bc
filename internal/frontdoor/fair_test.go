package frontdoor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// dialFrom connects to addr from the loopback address from (127.0.0.0/8 is all local).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedWithin says whether the server closes c within d (it reads and discards until then).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// TestPickVictim: at the bound, the connection closed for a newcomer is one not being answered:
// an idle one, or one waiting on its client (headers, body) of a client that holds more than
// the newcomer's would; of the client holding the most, the one that has waited longest; a
// proxy's only when idle and no client's will do; none when every connection is being answered.
func TestPickVictim(t *testing.T) {
	a, b, n := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.9")
	conn := func(client netip.Addr, proxy bool, began time.Duration, phase int64) *doorConn {
		c := &doorConn{client: client, proxy: proxy}
		c.mark.Store(int64(began)<<phaseBits | phase)
		return c
	}
	reserved := func(c *doorConn) *doorConn {
		c.reserved = true
		return c
	}
	newcomer := &doorConn{client: n}
	tests := []struct {
		name     string
		conns    []*doorConn
		newcomer *doorConn
		want     int // index of the victim; -1 for none
	}{
		{"the client holding the most gives way", []*doorConn{
			conn(b, false, 1, phaseIdle), conn(a, false, 3, phaseHeaders), conn(a, false, 2, phaseActive), conn(a, false, 4, phaseIdle)}, newcomer, 1},
		{"its connection that waited longest", []*doorConn{
			conn(a, false, 5, phaseIdle), conn(a, false, 2, phaseHeaders), conn(b, false, 1, phaseIdle)}, newcomer, 1},
		{"a request being answered is never cut", []*doorConn{
			conn(a, false, 1, phaseActive), conn(a, false, 2, phaseActive), conn(b, false, 3, phaseIdle)}, newcomer, 2},
		{"a proxy's idle connection, when no client's will do", []*doorConn{
			conn(a, false, 1, phaseActive), conn(b, true, 2, phaseHeaders), conn(b, true, 3, phaseIdle)}, newcomer, 2},
		{"a client's before a proxy's, though the proxy holds more", []*doorConn{
			conn(b, true, 1, phaseIdle), conn(b, true, 2, phaseIdle), conn(a, false, 3, phaseIdle)}, newcomer, 2},
		{"headers of a client holding no more than the newcomer's would: none", []*doorConn{
			conn(a, false, 1, phaseHeaders), conn(b, false, 2, phaseDone), conn(b, false, 3, phaseDone)}, newcomer, -1},
		{"headers of a client holding one give way to a proxy", []*doorConn{
			conn(a, false, 1, phaseHeaders), conn(b, false, 2, phaseActive)}, &doorConn{client: n, proxy: true}, 0},
		{"an idle connection gives way to a newcomer of a client that would hold as many", []*doorConn{
			conn(a, false, 1, phaseIdle), conn(b, false, 2, phaseDone), conn(b, false, 3, phaseDone)}, newcomer, 0},
		{"not to a bigger holder's: its client would lose a request sent on it", []*doorConn{
			conn(a, false, 1, phaseIdle), conn(b, false, 2, phaseBody), conn(b, false, 3, phaseBody)}, &doorConn{client: b}, -1},
		{"but to its own client's", []*doorConn{
			conn(b, false, 1, phaseIdle), conn(b, false, 2, phaseActive)}, &doorConn{client: b}, 0},
		{"not to a newcomer of the client holding the most", []*doorConn{
			conn(a, false, 1, phaseHeaders), conn(a, false, 2, phaseHeaders), conn(b, false, 3, phaseHeaders), conn(b, false, 4, phaseActive)}, &doorConn{client: a}, -1},
		{"a hijacked connection is not the door's to close", []*doorConn{conn(a, false, 1, phaseDone)}, newcomer, -1},
		{"a body the client holds back gives way as headers do", []*doorConn{
			conn(a, false, 1, phaseActive), conn(a, false, 2, phaseBody), conn(b, false, 3, phaseActive)}, newcomer, 1},
		{"whatever the phase, of the client holding the most", []*doorConn{
			conn(b, false, 1, phaseHeaders), conn(a, false, 2, phaseBody), conn(a, false, 3, phaseActive), conn(a, false, 4, phaseHeaders)}, newcomer, 1},
		{"a proxy's own slot gives way only to a proxy", []*doorConn{
			reserved(conn(b, true, 1, phaseIdle)), conn(a, false, 2, phaseActive)}, newcomer, -1},
		{"to a proxy, it does", []*doorConn{
			reserved(conn(b, true, 1, phaseIdle)), conn(a, false, 2, phaseActive)}, &doorConn{client: n, proxy: true}, 0},
		{"every connection is being answered", []*doorConn{conn(a, false, 1, phaseActive), conn(b, true, 1, phaseActive)}, newcomer, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := map[*doorConn]struct{}{}
			for _, c := range tt.conns {
				set[c] = struct{}{}
			}
			got := pickVictim(set, tt.newcomer)
			var want *doorConn
			if tt.want >= 0 {
				want = tt.conns[tt.want]
			}
			if got != want {
				t.Errorf("victim %+v, want %+v", got, want)
			}
		})
	}
}

// TestOneClientCannotHoldTheDoor: one address that holds every connection it may, all sending
// headers that never end, does not keep another client out: past its share its connections are
// closed as they are accepted, and at the bound its oldest connection gives way to a newcomer,
// while a request being answered is not cut.
func TestOneClientCannotHoldTheDoor(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	limits := DefaultHTTPLimits
	limits.MaxConnections, limits.MaxConnectionsPerClient = 8, 6
	addr, door := serveLimited(t, limits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	open := func() int {
		door.mu.Lock()
		defer door.mu.Unlock()
		return len(door.conns)
	}
	waitOpen := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); open() != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections open, want %d", open(), n)
			}
		}
	}

	// 127.0.0.3 holds two connections in requests being answered.
	for range 2 {
		c := dialFrom(t, "127.0.0.3", addr)
		if _, err := io.WriteString(c, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitOpen(2)
	// The attacker opens ten that send headers forever: six fit its share, four are closed.
	refusedBefore := testutil.ToFloat64(connRefused)
	var attacker []net.Conn
	for range 10 {
		c := dialFrom(t, "127.0.0.1", addr)
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nX-Slow: ")
		attacker = append(attacker, c)
	}
	waitOpen(8)
	// The door refuses the four as it accepts them, after the six it keeps.
	refused := func() float64 { return testutil.ToFloat64(connRefused) - refusedBefore }
	for deadline := time.Now().Add(5 * time.Second); refused() < 4 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := refused(); got != 4 || open() != 8 {
		t.Errorf("%v of the attacker's connections refused past its share and %d open, want 4 and 8", got, open())
	}
	// A newcomer at the bound gets the attacker's oldest connection's place, and its answer.
	evictedBefore := testutil.ToFloat64(httpEvicted)
	c := dialFrom(t, "127.0.0.2", addr)
	if _, err := fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the newcomer was not answered: %v", err)
	}
	_ = resp.Body.Close()
	if got := testutil.ToFloat64(httpEvicted) - evictedBefore; got != 1 {
		t.Errorf("%v connections evicted for the newcomer, want 1", got)
	}
	if !closedWithin(attacker[0], time.Second) {
		t.Error("the attacker's oldest connection was not the one closed")
	}
	door.mu.Lock()
	for dc := range door.conns {
		if dc.client == netip.MustParseAddr("127.0.0.3") && dc.phase() != phaseActive {
			t.Errorf("a request being answered was cut: phase %d", dc.phase())
		}
	}
	door.mu.Unlock()
}

// TestBodiesRefused: on a door that reads no body, a request that carries one is answered
// before its handler runs, without the body being read — a body that never ends included — and
// its connection closed; a request without one is served.
func TestBodiesRefused(t *testing.T) {
	limits := DefaultHTTPLimits
	limits.BodyRefusal = &Refusal{Status: http.StatusRequestEntityTooLarge, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"refused":true}`)}
	handled := make(chan string, 10)
	addr, _ := serveLimited(t, limits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled <- r.URL.Path
		_, _ = io.WriteString(w, "ok")
	}))
	for _, tc := range []struct{ name, request string }{
		{"a declared length never sent", "GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"},
		{"a chunked body that never ends", "GET /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFrom(t, "127.0.0.1", addr)
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(c)
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 413 || string(body) != `{"refused":true}` || !resp.Close || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("answer %d %q (closing %v, %v), want the refusal", resp.StatusCode, body, resp.Close, resp.Header)
			}
			if !closedWithin(c, 2*time.Second) {
				t.Error("the connection was not closed after the refusal")
			}
		})
	}
	c := dialFrom(t, "127.0.0.1", addr)
	if body, err := roundTrip(c, bufio.NewReader(c)); err != nil || body != "ok" {
		t.Errorf("a request without a body: %q, %v", body, err)
	}
	if got := strings.Join(drain(handled), ","); got != "/" {
		t.Errorf("handlers ran for %q, want only the request without a body", got)
	}
}

func drain(ch chan string) []string {
	var got []string
	for {
		select {
		case s := <-ch:
			got = append(got, s)
		default:
			return got
		}
	}
}
