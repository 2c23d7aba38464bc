package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/httpserve"
)

// serveLimited serves h on a loopback listener bounded to maxConns connections.
func serveLimited(t *testing.T, maxConns int, h http.Handler) (string, *connLimiter) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limited := newConnLimiter(l, maxConns)
	srv := httpserve.NewServer(h)
	srv.ConnState = limited.connState
	go func() { _ = srv.Serve(limited) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String(), limited
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
	addr, limited := serveLimited(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	var open []*limitedConn
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
