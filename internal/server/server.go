// Package server serves the /v1 Connections API from the informer cache: it authenticates
// every /v1 request against an in-memory index of hash Secrets and APIKeys (package keyindex),
// answers GET /v1/connections from pre-encoded JSON, and makes no API-server call per request.
//
// A request passes two layers. instrument (instrument.go) does what every request gets: a
// request id, the constant headers, the status for metrics, panic recovery and the access log.
// Inside it, api.serveV1 (api.go) decides, top to bottom: ready gate → authenticate → failure
// limiter → route → list (list.go, in the wire format of wire.go).
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/switchboard-dev/switchboard/internal/keyindex"
	"github.com/switchboard-dev/switchboard/internal/logging"
)

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

// Run serves until ctx is done, then fails readiness, waits ShutdownDelay, drains open requests
// and stops the cache. It returns an error when it cannot start or a listener fails.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.setDefaults(); err != nil {
		if opts.Listener != nil {
			_ = opts.Listener.Close()
		}
		return fmt.Errorf("server options: %w", err)
	}
	log := ctrl.Log.WithName("server")
	if opts.Logger != nil {
		log = *opts.Logger
	}
	// The manager's and the panel's requests carry this logger: nothing above V(5) (Secret bodies).
	log = logging.Capped(log)
	idx := keyindex.New()
	mgr, err := newManager(cfg, &opts, log)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	regs, err := registerIndex(ctx, mgr, idx, log.WithName("index"))
	if err != nil {
		return err
	}
	var synced, draining atomic.Bool
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("index", func(*http.Request) error {
		switch {
		case draining.Load():
			return errors.New("shutting down")
		case !synced.Load():
			return errors.New("the index has not synced")
		}
		return nil
	}); err != nil {
		return err
	}

	listeners := []net.Listener{opts.Listener}
	if opts.Listener == nil {
		l, err := net.Listen("tcp", opts.Listen)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", opts.Listen, err)
		}
		listeners[0] = l
	}
	api := &api{
		index:   idx,
		prefix:  opts.KeyPrefix,
		clock:   opts.Clock,
		ready:   &synced,
		limiter: newFailureLimiter(opts.FailureRate, opts.FailureBurst, opts.RateLimitClients),
		trusted: opts.TrustedProxies,
	}
	servers := []*http.Server{newHTTPServer(instrument(api, opts.TrustedProxies, log.WithName("http")))}
	if opts.PanelListen != "" {
		l, err := net.Listen("tcp", opts.PanelListen)
		if err != nil {
			_ = listeners[0].Close()
			return fmt.Errorf("listening on %s for the panel: %w", opts.PanelListen, err)
		}
		listeners = append(listeners, l)
		servers = append(servers, newHTTPServer(opts.Panel))
	}

	// The cache outlives ctx until the listeners have drained, so draining requests are answered.
	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMgr()
	errs := make(chan error, len(servers)+1)
	mgrDone := make(chan struct{})
	go func() {
		defer close(mgrDone)
		if err := mgr.Start(mgrCtx); err != nil {
			errs <- fmt.Errorf("running the manager: %w", err)
		}
	}()
	go waitSynced(mgrCtx, regs, &synced, log)
	go newUsageWriter(idx, mgr.GetClient(), &opts, log.WithName("last-used")).run(mgrCtx)
	for i, srv := range servers {
		go func() {
			log.Info("serving", "address", listeners[i].Addr().String())
			if err := srv.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serving on %s: %w", listeners[i].Addr(), err)
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
	if runErr == nil && opts.ShutdownDelay > 0 {
		time.Sleep(opts.ShutdownDelay)
	}
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(drainCtx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("draining: %w", err))
		}
	}
	stopMgr()
	<-mgrDone
	return runErr
}

// waitSynced marks the server ready once every informer has delivered its initial list to the
// index. Until then /v1 answers 503: a key must never be judged against a partial index.
func waitSynced(ctx context.Context, regs []toolscache.ResourceEventHandlerRegistration, synced *atomic.Bool, log logr.Logger) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	nextLog := start.Add(30 * time.Second)
	for {
		all := true
		for _, r := range regs {
			all = all && r.HasSynced()
		}
		if all {
			synced.Store(true)
			log.Info("index synced; serving /v1")
			return
		}
		if time.Now().After(nextLog) {
			// Usually RBAC: the server must list and watch Connections and APIKeys cluster-wide
			// and Secrets in the system namespace.
			log.Info("still waiting for the cache to sync; /v1 answers 503", "waited", time.Since(start).Round(time.Second))
			nextLog = time.Now().Add(30 * time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
