package server

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// TestRunClosesTheListenerItCannotServe: Run owns the listener it is given; when it cannot
// start (a configuration that does not validate, a Redis URL that does not parse, a probe address in use,
// which fails the manager), the listener is closed, not left open for the caller to guess
// about (before issue 21 the last one leaked it).
func TestRunClosesTheListenerItCannotServe(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	inUse := taken.Addr().String()
	tests := []struct {
		name string
		c    *sc
	}{
		{"a configuration that does not validate", &sc{KeyPrefix: "Not A Prefix"}},
		{"a rate-limit store that cannot be built", &sc{RateLimitRedis: configv1alpha1.RateLimitRedis{URL: "redis://localhost/not-a-database"}}},
		{"a probe address in use", &sc{HealthProbeBindAddress: &inUse}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if err := Run(context.Background(), testConfig(tt.c), Deps{RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}, Listener: l}); err == nil {
				t.Fatal("Run started with options it should refuse")
			}
			// An open listener would block Accept: the deadline turns that into a failure.
			_ = l.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second))
			if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("the listener is still open: Accept returned %v", err)
			}
		})
	}
}
