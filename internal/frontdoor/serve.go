package frontdoor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
)

// Listener is one listener a process declares: which door it is, where it listens and what it
// serves there. A Group opens it, builds it through its door and serves it with the others.
type Listener struct {
	// Door is its door's name in Doors ("api", "probes", …).
	Door string
	// Address is where it listens; "" (and nothing Given): it is not served.
	Address string
	// Given, when set, is served in place of a socket on Address (tests' listeners). Its Group
	// closes it, whatever happens.
	Given net.Listener
	// Limits are an HTTP listener's (nil: its door's).
	Limits *HTTPLimits
	// TLS, when set, serves HTTPS.
	TLS *tls.Config
	// Handler answers an HTTP listener's requests.
	Handler http.Handler
	// GRPC, when set, serves Server, which it built (GRPC.NewServer), within its limits, in place
	// of Handler; BeforeStop, when set, runs as the listener starts to drain (to fail gRPC health).
	GRPC       *GRPC
	Server     *grpc.Server
	BeforeStop func()
}

// Served says whether l is to be served: given, or with an address.
func (l Listener) Served() bool { return l.Given != nil || l.Address != "" }

// open is l listening (Given, or a socket on Address: the product's one call that opens a
// serving socket, which a test checks) and built through its door.
func (l Listener) open() (Endpoint, error) {
	door, ok := DoorNamed(l.Door)
	if !ok || l.GRPC == nil && door.HTTP == nil {
		return Endpoint{}, fmt.Errorf("a listener of no HTTP or gRPC door of the front door's table: %q", l.Door)
	}
	sock := l.Given
	if sock == nil {
		var err error
		//nolint:noctx // a listener that lives as long as its door
		if sock, err = net.Listen("tcp", l.Address); err != nil {
			return Endpoint{}, fmt.Errorf("listening on %s for the %s listener: %w", l.Address, l.Door, err)
		}
	}
	if l.GRPC != nil {
		return l.GRPC.Endpoint(sock, l.Server, l.BeforeStop), nil
	}
	limits := door.HTTP
	if l.Limits != nil {
		limits = l.Limits
	}
	return HTTPS(sock, *limits, l.TLS, l.Handler), nil
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

// Group is a process's listeners, declared, served together and stopped together: the one way
// a switchboard process serves anything.
type Group struct {
	// Listeners are served until the context is done or one of them fails; those not Served
	// are left out.
	Listeners []Listener
	// Draining is set when the group starts to stop; readiness checks read it.
	Draining *atomic.Bool
	// ShutdownDelay is how long readiness fails before the listeners stop accepting; skipped
	// when the group stops because something failed.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the draining of open requests.
	ShutdownTimeout time.Duration
	// Failed, when set, reports a failure of something the listeners depend on (the server's
	// cache); it stops the group like a failing listener.
	Failed <-chan error
	// Log says where each listener serves and when the group stops.
	Log logr.Logger

	endpoints []Endpoint
	opened    bool
}

// Open opens every listener served and builds it through its door, for Run to serve (a process
// that must know its ports open before it starts the rest). If one cannot be, it closes those
// it opened and those given, and says which could not.
func (g Group) Open() (Group, error) {
	for i, l := range g.Listeners {
		if !l.Served() {
			continue
		}
		e, err := l.open()
		if err != nil {
			for _, opened := range g.endpoints {
				_ = opened.Listener.Close()
			}
			for _, rest := range g.Listeners[i:] {
				if rest.Given != nil {
					_ = rest.Given.Close()
				}
			}
			return Group{}, err
		}
		g.endpoints = append(g.endpoints, e)
	}
	g.opened = true
	return g, nil
}

// Run serves every listener (opening them first, unless Open did) until ctx is done or
// something fails, then fails readiness, waits ShutdownDelay and drains open requests. It
// returns the failure, if any, and draining errors. The doors' time bounds hold until every
// listener has drained.
func (g Group) Run(ctx context.Context) error {
	if !g.opened {
		var err error
		if g, err = g.Open(); err != nil {
			return err
		}
	}
	watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	var watchers sync.WaitGroup
	defer func() {
		stopWatching()
		watchers.Wait()
	}()
	errs := make(chan error, len(g.endpoints))
	for _, e := range g.endpoints {
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
	for _, e := range g.endpoints {
		if err := e.server.Shutdown(drainCtx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("draining: %w", err))
		}
	}
	return runErr
}
