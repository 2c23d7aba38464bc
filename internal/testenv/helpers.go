package testenv

import (
	"net"
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

// FreeLoopback is FreeAddr for callers without a test (internal/testenv/system's TestMain).
func FreeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return addr, nil
}
