package panel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// ServeOptions configure Serve, the panel as a process of its own (`switchboard panel`).
type ServeOptions struct {
	// Listen is the panel's address (default ":8083").
	Listen string
	// Listener, when set, is used instead of listening on Listen (tests pass a ":0" listener).
	Listener net.Listener
	// HealthProbeBindAddress serves /healthz and /readyz; "0" (or empty) disables it.
	HealthProbeBindAddress string
	// ShutdownDelay is how long readiness fails before the listener stops accepting (default
	// 5s; negative: none). ShutdownTimeout bounds the draining of open requests (default 30s).
	ShutdownDelay   time.Duration
	ShutdownTimeout time.Duration
}

// HTTP limits of the panel's listener. The write timeout leaves room for the longest answer:
// a rotation that waits Options.RevealTimeout (20s by default) for the operator.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 8 << 10
)

// Serve runs the panel alone until ctx is done, then fails readiness, waits ShutdownDelay and
// drains open requests. It watches no objects and holds no cache: a panel failure or overload
// stays in its own process, away from /v1, and its identity needs only "create" on
// tokenreviews.
func Serve(ctx context.Context, cfg *rest.Config, opts Options, serve ServeOptions) error {
	if serve.Listen == "" {
		serve.Listen = ":8083"
	}
	if serve.ShutdownDelay == 0 {
		serve.ShutdownDelay = 5 * time.Second
	}
	if serve.ShutdownTimeout == 0 {
		serve.ShutdownTimeout = 30 * time.Second
	}
	h, err := newHandler(cfg, opts)
	if err != nil {
		return err
	}
	log := h.opts.Logger
	l := serve.Listener
	if l == nil {
		if l, err = net.Listen("tcp", serve.Listen); err != nil {
			return fmt.Errorf("listening on %s for the panel: %w", serve.Listen, err)
		}
	}
	servers := map[net.Listener]*http.Server{l: newHTTPServer(h)}
	var draining atomic.Bool
	if serve.HealthProbeBindAddress != "" && serve.HealthProbeBindAddress != "0" {
		probes, err := net.Listen("tcp", serve.HealthProbeBindAddress)
		if err != nil {
			_ = l.Close()
			return fmt.Errorf("listening on %s for the probes: %w", serve.HealthProbeBindAddress, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/healthz", http.StripPrefix("/healthz", &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}))
		mux.Handle("/readyz", http.StripPrefix("/readyz", &healthz.Handler{Checks: map[string]healthz.Checker{"serving": func(*http.Request) error {
			if draining.Load() {
				return errors.New("shutting down")
			}
			return nil
		}}}))
		servers[probes] = newHTTPServer(mux)
	}
	errs := make(chan error, len(servers))
	for listener, srv := range servers {
		go func() {
			log.Info("serving", "address", listener.Addr().String())
			if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serving on %s: %w", listener.Addr(), err)
			}
		}()
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	draining.Store(true)
	log.Info("shutting down: readiness fails, then open requests drain")
	if runErr == nil && serve.ShutdownDelay > 0 {
		time.Sleep(serve.ShutdownDelay)
	}
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serve.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(drainCtx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("draining: %w", err))
		}
	}
	return runErr
}

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}
