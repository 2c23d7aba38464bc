package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Listen opens a TCP listener on addr, for a door to serve: the product's one call that opens
// a serving socket (a test checks), so that no listener is served without a door's limits.
func Listen(addr string) (net.Listener, error) {
	return net.Listen("tcp", addr) //nolint:noctx // a listener that lives as long as its door
}

// Endpoint is a listener and its server, built by a door (HTTP, HTTPS, GRPC.Endpoint) with
// its limits.
type Endpoint struct {
	// Listener is what the server serves on.
	Listener net.Listener
	server   Server
	// watch, when set, keeps the door's time bounds until its context ends.
	watch func(context.Context)
}

// Server is what an Endpoint serves: *http.Server's two methods.
type Server interface {
	Serve(net.Listener) error
	// Shutdown stops accepting and waits for open calls until ctx is done.
	Shutdown(ctx context.Context) error
}

// Serve serves e until ctx is done, then drains its open requests for up to drain: for an
// endpoint served alone, inside a manager's runnable.
func (e Endpoint) Serve(ctx context.Context, drain time.Duration, log logr.Logger) error {
	return Group{Endpoints: []Endpoint{e}, ShutdownTimeout: drain, Log: log}.Run(ctx)
}

// Group is a set of endpoints that start and stop together.
type Group struct {
	// Endpoints are served until the context is done or one of them fails.
	Endpoints []Endpoint
	// Draining is set when the group starts to stop; readiness checks read it.
	Draining *atomic.Bool
	// ShutdownDelay is how long readiness fails before the listeners stop accepting; skipped
	// when the group stops because something failed.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the draining of open requests.
	ShutdownTimeout time.Duration
	// Failed, when set, reports a failure of something the endpoints depend on (the server's
	// cache); it stops the group like a failing listener.
	Failed <-chan error
	// Log says where each endpoint serves and when the group stops.
	Log logr.Logger
}

// Run serves every endpoint until ctx is done or something fails, then fails readiness, waits
// ShutdownDelay and drains open requests. It returns the failure, if any, and draining errors.
// The doors' time bounds hold until every endpoint has drained.
func (g Group) Run(ctx context.Context) error {
	watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	var watchers sync.WaitGroup
	defer func() {
		stopWatching()
		watchers.Wait()
	}()
	errs := make(chan error, len(g.Endpoints))
	for _, e := range g.Endpoints {
		if e.watch != nil {
			watchers.Go(func() { e.watch(watchCtx) })
		}
		go func() {
			g.Log.Info("serving", "address", e.Listener.Addr().String())
			if err := e.server.Serve(e.Listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serving on %s: %w", e.Listener.Addr(), err)
			}
		}()
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	case runErr = <-g.Failed: // a nil channel never answers
	}
	if g.Draining != nil {
		g.Draining.Store(true)
	}
	g.Log.Info("shutting down: readiness fails, then open requests drain")
	if runErr == nil && g.ShutdownDelay > 0 {
		time.Sleep(g.ShutdownDelay)
	}
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.ShutdownTimeout)
	defer cancel()
	for _, e := range g.Endpoints {
		if err := e.server.Shutdown(drainCtx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("draining: %w", err))
		}
	}
	return runErr
}
