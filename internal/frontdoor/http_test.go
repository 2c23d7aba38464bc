package frontdoor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// serveLimited serves h through an HTTP door with limits on a loopback listener.
func serveLimited(t *testing.T, limits HTTPLimits, h http.Handler) (string, *door) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := HTTP(l, limits, h)
	ctx, cancel := context.WithCancel(context.Background())
	go e.watch(ctx)
	go func() { _ = e.server.Serve(e.Listener) }()
	t.Cleanup(func() { _ = e.server.(*http.Server).Close(); cancel() })
	return l.Addr().String(), e.Listener.(*door)
}

// withMax is the default time limits with at most max connections.
func withMax(max int) HTTPLimits {
	l := DefaultHTTPLimits
	l.MaxConnections = max
	return l
}

// roundTrip sends a keep-alive GET on conn and reads the answer's body.
func roundTrip(conn net.Conn, r *bufio.Reader) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestConnLimiter: at the bound, a new connection is served by closing an idle keep-alive one;
// when every connection is busy, it waits until one closes; and the sockets' buffers are fixed.
func TestConnLimiter(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 2)
	addr, limited := serveLimited(t, withMax(2), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			entered <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, bufio.NewReader(c)
	}
	// Two idle keep-alive connections fill the bound.
	first, firstR := dial()
	second, secondR := dial()
	for _, c := range []struct {
		conn net.Conn
		r    *bufio.Reader
	}{{first, firstR}, {second, secondR}} {
		if body, err := roundTrip(c.conn, c.r); err != nil || body != "ok" {
			t.Fatalf("a connection within the bound: %q, %v", body, err)
		}
	}
	// A third is served: one of the idle ones is closed for it.
	third, thirdR := dial()
	if body, err := roundTrip(third, thirdR); err != nil || body != "ok" {
		t.Fatalf("a connection past the bound with idle ones open: %q, %v", body, err)
	}
	closed := 0
	for _, c := range []struct {
		conn net.Conn
		r    *bufio.Reader
	}{{first, firstR}, {second, secondR}} {
		if _, err := roundTrip(c.conn, c.r); err != nil {
			closed++
		}
	}
	if closed != 1 {
		t.Errorf("%d idle connections were closed for the new one, want 1", closed)
	}

	// Now both open connections are busy: a new one waits until one of them closes.
	limited.mu.Lock()
	var open []*doorConn
	for c := range limited.conns {
		open = append(open, c)
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			if raw, err := tc.SyscallConn(); err == nil {
				checkSocketBuffers(t, raw)
			}
		}
	}
	limited.mu.Unlock()
	if len(open) != 2 {
		t.Fatalf("%d connections open, want 2", len(open))
	}
	busy := make(chan error, 2)
	for range 2 {
		go func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				busy <- err
				return
			}
			defer func() { _ = c.Close() }()
			_, err = fmt.Fprint(c, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
			busy <- err
			_, _ = io.ReadAll(c)
		}()
	}
	for range 2 {
		if err := <-busy; err != nil {
			t.Fatal(err)
		}
	}
	<-entered
	<-entered
	waiting, waitingR := dial()
	got := make(chan string, 1)
	go func() {
		body, err := roundTrip(waiting, waitingR)
		got <- fmt.Sprint(body, err)
	}()
	select {
	case g := <-got:
		t.Fatalf("a connection past the bound was served while every connection was busy: %s", g)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	select {
	case g := <-got:
		if g != "ok<nil>" {
			t.Errorf("the waiting connection got %s", g)
		}
	case <-time.After(5 * time.Second):
		t.Error("the waiting connection was never served after the busy ones finished")
	}
}

// checkSocketBuffers checks an accepted socket's buffers are the fixed ones, inherited from the
// listening socket (Linux reports twice what was set), rather than autotuned.
func checkSocketBuffers(t *testing.T, raw interface {
	Control(func(fd uintptr)) error
}) {
	t.Helper()
	for name, opt := range map[string]int{"send": syscall.SO_SNDBUF, "receive": syscall.SO_RCVBUF} {
		var n int
		var err error
		_ = raw.Control(func(fd uintptr) { n, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt) })
		if err != nil || n != 2*socketBuffer {
			t.Errorf("%s buffer %d (%v), want %d", name, n, err, 2*socketBuffer)
		}
	}
}

func TestConnLimitsOverdue(t *testing.T) {
	limits := HTTPLimits{Headers: 5 * time.Second, Active: 30 * time.Second, Idle: 120 * time.Second}
	mark := func(began time.Duration, phase int64) int64 { return int64(began)<<phaseBits | phase }
	at := func(d time.Duration) int64 { return int64(d) }
	s := time.Second
	tests := []struct {
		name      string
		mark, now int64
		want      bool
	}{
		{"headers within their bound", mark(100*s, phaseHeaders), at(105 * s), false},
		{"headers a nanosecond past their bound", mark(100*s, phaseHeaders), at(105*s + 1), true},
		{"active at the headers' bound", mark(100*s, phaseActive), at(106 * s), false},
		{"active at its bound", mark(100*s, phaseActive), at(130 * s), false},
		{"active past its bound", mark(100*s, phaseActive), at(130*s + 1), true},
		{"idle at the active bound", mark(100*s, phaseIdle), at(131 * s), false},
		{"idle past its bound", mark(100*s, phaseIdle), at(220*s + 1), true},
		{"hijacked or closed, long after", mark(0, phaseDone), at(1 << 60), false},
		{"began at the clock's start", mark(0, phaseHeaders), at(5*s + 1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := limits.overdue(tt.mark, tt.now); got != tt.want {
				t.Errorf("overdue = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestConnTimeLimits: the listener keeps HTTP's time limits in place of net/http's per-request
// deadlines. A client that sends its headers slowly, first or after an idle spell, is cut off
// after the headers' bound; an idle keep-alive connection after the idle bound; a client that
// does not read its answer after the active bound, failing the handler's write; none before.
// A connection in steady use is never cut.
func TestConnTimeLimits(t *testing.T) {
	limits := HTTPLimits{Headers: 300 * time.Millisecond, Active: 600 * time.Millisecond, Idle: 1200 * time.Millisecond}
	big := []byte(strings.Repeat("x", 8<<20))
	writeErr := make(chan error, 1)
	addr, _ := serveLimited(t, limits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, err := w.Write(big)
			writeErr <- err
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, bufio.NewReader(c)
	}
	// closedAfter waits until the server closes c and says how long that took from start.
	closedAfter := func(t *testing.T, c net.Conn, start time.Time) time.Duration {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server did not close the connection within 10 s")
		}
		return time.Since(start)
	}
	within := func(t *testing.T, what string, took, bound, next time.Duration) {
		t.Helper()
		if took < bound {
			t.Errorf("%s: closed after %v, before its bound of %v", what, took, bound)
		}
		if took >= next {
			t.Errorf("%s: closed after %v, not before %v: the wrong bound applied", what, took, next)
		}
	}

	t.Run("slow first headers", func(t *testing.T) {
		// The headers' bound counts from the accept, which may come before Dial returns here.
		start := time.Now()
		c, _ := dial(t)
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		before := testutil.ToFloat64(timedOutIn[phaseHeaders])
		within(t, "headers never finished", closedAfter(t, c, start), limits.Headers, limits.Idle)
		if got := testutil.ToFloat64(timedOutIn[phaseHeaders]) - before; got != 1 {
			t.Errorf("%v connections counted timed out in their headers, want 1", got)
		}
	})
	t.Run("slow headers after an idle spell", func(t *testing.T) {
		c, r := dial(t)
		if body, err := roundTrip(c, r); err != nil || body != "ok" {
			t.Fatalf("first request: %q, %v", body, err)
		}
		time.Sleep(limits.Headers) // idle, within its bound
		start := time.Now()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
		// The idle bound, still counted from the end of the first answer, would close it later.
		within(t, "second request's headers never finished", closedAfter(t, c, start), limits.Headers, limits.Idle-limits.Headers)
	})
	t.Run("idle", func(t *testing.T) {
		c, r := dial(t)
		if body, err := roundTrip(c, r); err != nil || body != "ok" {
			t.Fatalf("first request: %q, %v", body, err)
		}
		start := time.Now()
		before := testutil.ToFloat64(timedOutIn[phaseIdle])
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := r.ReadByte(); err == nil || !errors.Is(err, io.EOF) {
			t.Fatalf("idle connection: read %v, want the server to close it", err)
		}
		within(t, "idle keep-alive connection", time.Since(start), limits.Idle, 10*time.Second)
		if got := testutil.ToFloat64(timedOutIn[phaseIdle]) - before; got != 1 {
			t.Errorf("%v connections counted timed out idle, want 1", got)
		}
	})
	t.Run("an answer nobody reads", func(t *testing.T) {
		c, _ := dial(t)
		start := time.Now()
		if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-writeErr:
			took := time.Since(start)
			if err == nil {
				t.Fatal("the handler wrote 8 MiB to a client that reads nothing")
			}
			within(t, "unread answer", took, limits.Active, 10*time.Second)
		case <-time.After(10 * time.Second):
			t.Fatal("the handler's write to a client that reads nothing never failed")
		}
	})
	t.Run("steady use", func(t *testing.T) {
		c, r := dial(t)
		for end := time.Now().Add(2 * limits.Idle); time.Now().Before(end); time.Sleep(limits.Headers / 3) {
			if body, err := roundTrip(c, r); err != nil || body != "ok" {
				t.Fatalf("a connection in steady use: %q, %v", body, err)
			}
		}
	})
}

// TestConnLimiterForgetsClosedConnections: a connection its client closes, before or after a
// request, leaves the listener's set (which the time-limit watcher walks) and frees its slot.
func TestConnLimiterForgetsClosedConnections(t *testing.T) {
	addr, limited := serveLimited(t, withMax(8), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	for i := range 100 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if body, err := roundTrip(c, bufio.NewReader(c)); err != nil || body != "ok" {
				t.Fatalf("request %d: %q, %v", i, body, err)
			}
		}
		_ = c.Close()
	}
	open := func() int {
		limited.mu.Lock()
		defer limited.mu.Unlock()
		return len(limited.conns)
	}
	for deadline := time.Now().Add(5 * time.Second); open() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d closed connections still in the listener's set after 5 s", open())
		}
	}
	if n := len(limited.shared); n != 0 {
		t.Errorf("%d slots held by closed connections", n)
	}
}
