package testenv

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Eventually polls cond until it returns nil, and fails the test with cond's last error when
// timeout passes first. Short waits poll often; long ones, which usually list objects from the
// API server, poll at most ten times a second.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	interval := min(max(timeout/500, 10*time.Millisecond), 100*time.Millisecond)
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

// FreeAddr returns a loopback address that was free a moment ago, for listeners that take an
// address rather than a net.Listener (child processes, controller-runtime's probe server).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := FreeLoopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// handedOut holds every address FreeLoopback returned in this process: the kernel may give a
// port it just freed to the next listener on port 0, and two listeners of one child process
// (the forward-auth and metrics ports of one server, say) must not be handed the same one.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// FreeLoopback is FreeAddr for callers without a test (internal/testenv/system's TestMain). It
// never returns an address it returned before.
func FreeLoopback() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		if err := l.Close(); err != nil {
			return "", err
		}
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr, nil
		}
	}
	return "", errors.New("no loopback port that this process was not handed already, in 100 tries")
}

// ListenLoopback listens on a loopback port that FreeLoopback has not handed out: on port 0 the
// kernel may give a listener the port FreeAddr just freed for another listener of the same
// test (the probes' of the server whose API listens here, say), which that one would then fail
// to bind. The test closes it when it ends, unless closed before.
func ListenLoopback(t testing.TB) net.Listener {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	var taken []net.Listener // held open while looking, so the kernel hands out another
	defer func() {
		for _, l := range taken {
			_ = l.Close()
		}
	}()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if addr := l.Addr().String(); !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			t.Cleanup(func() { _ = l.Close() })
			return l
		}
		taken = append(taken, l)
	}
	t.Fatal("no loopback port that this process was not handed already, in 100 tries")
	return nil
}

// HeaderBlockStatus sends addr's listener (over TLS, unverified, with useTLS) a GET of path
// whose request line and headers take size bytes, and returns the answer's status: the front
// door answers 431 past frontdoor.MaxHeaderBlock, where net/http's default takes 1 MiB.
func HeaderBlockStatus(addr, path string, useTLS bool, size int) (int, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	var conn net.Conn
	var err error
	if useTLS {
		conn, err = tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the listeners' certificates are self-signed
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	head := "GET " + path + " HTTP/1.1\r\nHost: switchboard\r\nX-Pad: "
	const tail = "\r\n\r\n"
	if _, err := io.WriteString(conn, head+strings.Repeat("a", max(size-len(head)-len(tail), 0))+tail); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
