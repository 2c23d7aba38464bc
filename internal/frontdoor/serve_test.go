package frontdoor

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// TestGroupDrainsOpenRequests: when the context ends, readiness fails first, and a request in
// flight is answered before Run returns.
func TestGroupDrainsOpenRequests(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var draining atomic.Bool
	drainingSeen := make(chan bool, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		drainingSeen <- draining.Load()
		_, _ = io.WriteString(w, "done")
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- Group{Endpoints: []Endpoint{HTTP(l, DefaultHTTPLimits, h)}, Draining: &draining,
			ShutdownDelay: 10 * time.Millisecond, ShutdownTimeout: 10 * time.Second, Log: logr.Discard()}.Run(ctx)
	}()
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + l.Addr().String() + "/")
		if err != nil {
			answer <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	<-entered
	cancel()
	for !draining.Load() {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if got := <-answer; got != "done" {
		t.Fatalf("the request in flight got %q, want it answered", got)
	}
	if !<-drainingSeen {
		t.Fatal("readiness did not fail before the request was answered")
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestGroupStopsOnFailure: a failure of what the endpoints depend on stops the group and is
// returned.
func TestGroupStopsOnFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	failed <- errors.New("the cache broke")
	var draining atomic.Bool
	err = Group{Endpoints: []Endpoint{HTTP(l, DefaultHTTPLimits, http.NotFoundHandler())}, Draining: &draining,
		ShutdownDelay: time.Hour, ShutdownTimeout: time.Second, Failed: failed, Log: logr.Discard()}.Run(context.Background())
	if err == nil || err.Error() != "the cache broke" {
		t.Fatalf("Run = %v, want the failure", err)
	}
	if !draining.Load() {
		t.Fatal("draining was not set")
	}
}
