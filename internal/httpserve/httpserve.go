// Package httpserve runs switchboard's HTTP listeners (the /v1 API, the panel, their probes)
// with one set of limits and one way of stopping: readiness fails first, so that load
// balancers stop sending, then open requests drain.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// HTTP limits of every listener. The write timeout leaves room for the panel's longest answer,
// a rotation that waits for the operator.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 120 * time.Second
	// MaxHeaderBlock is the most bytes a request line and its headers (CRLFs included) may take;
	// one byte more is answered 431 by Go's HTTP server before any handler runs. A key is 57
	// bytes, so 8 KiB leaves room for what proxies add.
	MaxHeaderBlock = 8 << 10
	// maxHeaderBytes is what makes net/http enforce MaxHeaderBlock: it reads up to
	// MaxHeaderBytes + 4096 bytes ("bufio slop", net/http's initialReadLimitSize) for them.
	maxHeaderBytes = MaxHeaderBlock - 4096
)

// NewServer returns an http.Server for h with the limits above.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// Endpoint is a listener and what it serves: Handler over HTTP with the limits above, or Server
// when it is set (a gRPC server, say), which then stops with the others.
type Endpoint struct {
	Listener net.Listener
	Handler  http.Handler
	Server   Server
	// ConnState, when set, is the server's ConnState hook (a listener that bounds its
	// connections learns from it which are idle).
	ConnState func(net.Conn, http.ConnState)
	// OwnDeadlines is set when Listener's connections keep the time limits above themselves
	// (closed past them, as internal/server's API listener does): the server then sets no
	// deadline per request, each of which costs net/http a timer change.
	OwnDeadlines bool
}

// HTTPServer returns the http.Server that serves e.Handler.
func (e Endpoint) HTTPServer() *http.Server {
	srv := NewServer(e.Handler)
	srv.ConnState = e.ConnState
	if e.OwnDeadlines {
		srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = 0, 0, 0, 0
	}
	return srv
}

// Server is what an Endpoint serves other than HTTP: *http.Server's two methods.
type Server interface {
	Serve(net.Listener) error
	// Shutdown stops accepting and waits for open calls until ctx is done.
	Shutdown(ctx context.Context) error
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
func (g Group) Run(ctx context.Context) error {
	servers := make([]Server, len(g.Endpoints))
	errs := make(chan error, len(g.Endpoints))
	for i, e := range g.Endpoints {
		if servers[i] = e.Server; e.Server == nil {
			servers[i] = e.HTTPServer()
		}
		go func() {
			g.Log.Info("serving", "address", e.Listener.Addr().String())
			if err := servers[i].Serve(e.Listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
	for _, srv := range servers {
		if err := srv.Shutdown(drainCtx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("draining: %w", err))
		}
	}
	return runErr
}
