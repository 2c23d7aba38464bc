package frontdoor

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
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
		ran <- Group{Listeners: []Listener{{Door: "api", Given: l, Limits: &DefaultHTTPLimits, Handler: h}}, Draining: &draining,
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
	err = Group{Listeners: []Listener{{Door: "api", Given: l, Limits: &DefaultHTTPLimits, Handler: http.NotFoundHandler()}}, Draining: &draining,
		ShutdownDelay: time.Hour, ShutdownTimeout: time.Second, Failed: failed, Log: logr.Discard()}.Run(context.Background())
	if err == nil || err.Error() != "the cache broke" {
		t.Fatalf("Run = %v, want the failure", err)
	}
	if !draining.Load() {
		t.Fatal("draining was not set")
	}
}

// TestOpenClosesWhatItCannotServe: a listener that cannot listen (its port taken) fails the
// group's Open, which names its door and closes every listener the group held, opened before
// it or given after it; a listener of no door of the table is refused; one with neither an
// address nor a listener given is left out.
func TestOpenClosesWhatItCannotServe(t *testing.T) {
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	closed := func(l net.Listener) bool {
		_ = l.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second))
		_, err := l.Accept()
		return errors.Is(err, net.ErrClosed)
	}
	taken, first, last := listen(), listen(), listen()
	_, err := Group{Listeners: []Listener{
		{Door: "api", Given: first, Handler: http.NotFoundHandler()},
		{Door: "panel"},
		{Door: "probes", Address: taken.Addr().String(), Handler: http.NotFoundHandler()},
		{Door: "metrics", Given: last, Handler: http.NotFoundHandler()},
	}}.Open()
	if err == nil || !strings.Contains(err.Error(), "for the probes listener") {
		t.Fatalf("Open = %v, want the probes' port refused", err)
	}
	if !closed(first) || !closed(last) {
		t.Error("a listener the group held is still open")
	}
	if closed(taken) {
		t.Error("the group closed a listener it was not given")
	}
	nowhere := listen()
	if _, err := (Group{Listeners: []Listener{{Door: "nowhere", Given: nowhere}}}).Open(); err == nil || !closed(nowhere) {
		t.Errorf("a listener of no door: Open = %v, closed %t; want refused and closed", err, closed(nowhere))
	}
	g, err := Group{Listeners: []Listener{{Door: "panel"}}}.Open()
	if err != nil || len(g.endpoints) != 0 {
		t.Errorf("a listener not served: Open = %v, %d endpoints; want none and no error", err, len(g.endpoints))
	}
}
