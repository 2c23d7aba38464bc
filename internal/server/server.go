// Package server serves the /v1 Connections API from the informer cache: it authenticates
// every /v1 request against an in-memory index of hash Secrets and APIKeys (package keyindex),
// answers GET /v1/connections from pre-encoded JSON, and makes no API-server call per request.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
	"github.com/switchboard-dev/switchboard/internal/logging"
)

// Options configure the API server. Zero values take the documented defaults.
type Options struct {
	// Listen is the address of the /v1 API (default ":8080"). Ignored when Listener is set.
	Listen string
	// Listener, when set, is used instead of listening on Listen (tests pass a ":0" listener).
	Listener net.Listener
	// MetricsBindAddress serves Prometheus metrics; "0" (or empty) disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" (or empty) disables it.
	HealthProbeBindAddress string
	// SystemNamespace holds the hash Secrets (default switchboard-system).
	SystemNamespace string
	// KeyPrefix begins every valid key (default "sb").
	KeyPrefix string

	// TrustedProxies are the peers whose X-Forwarded-For is believed to find the client address.
	TrustedProxies []netip.Prefix
	// FailureRate is how many failed authentications per second an address regains (default 1);
	// negative disables the limit.
	FailureRate float64
	// FailureBurst is how many failures an address may make at once (default 20).
	FailureBurst int
	// RateLimitClients bounds how many addresses the limiter remembers (default 65536).
	RateLimitClients int

	// LastUsedInterval is the least time between two writes of one key's lastUsedAt (default 1m).
	LastUsedInterval time.Duration
	// LastUsedFlush is how often used keys are looked for (default 10s).
	LastUsedFlush time.Duration
	// LastUsedWriteRate bounds the status.lastUsedAt writes of this replica per second (default
	// 20). With more keys in use than LastUsedWriteRate×LastUsedInterval, the stalest are
	// written first and each key less often.
	LastUsedWriteRate float64

	// ShutdownDelay is how long readiness fails before the listener stops accepting, so that
	// load balancers stop sending first (default 5s; negative: none).
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the draining of open requests (default 30s).
	ShutdownTimeout time.Duration

	// PanelListen, when set, serves Panel on this address with the same timeouts and shutdown.
	PanelListen string
	// Panel is the panel's handler (panel.NewHandler); required when PanelListen is set.
	Panel http.Handler

	// Clock decides expiry and grace; the real clock by default (tests inject another).
	Clock clock.PassiveClock
	// Logger is the server's logger (default ctrl.Log.WithName("server")).
	Logger *logr.Logger
}

// HTTP limits of the API listener.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
	// maxHeaderBytes keeps headers small: a key is 57 bytes. Go's server answers 431 past it
	// (it allows 4 KiB of slack), before the handler runs.
	maxHeaderBytes = 8 << 10
)

func (o *Options) setDefaults() error {
	if o.Listen == "" {
		o.Listen = ":8080"
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = switchboardv1alpha1.DefaultSystemNamespace
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = apikey.DefaultPrefix
	}
	if err := apikey.ValidatePrefix(o.KeyPrefix); err != nil {
		return err
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = "0"
	}
	if o.FailureRate == 0 {
		o.FailureRate = 1
	}
	if o.FailureBurst == 0 {
		o.FailureBurst = 20
	}
	if o.RateLimitClients == 0 {
		o.RateLimitClients = 1 << 16
	}
	if o.LastUsedInterval == 0 {
		o.LastUsedInterval = time.Minute
	}
	if o.LastUsedFlush == 0 {
		o.LastUsedFlush = 10 * time.Second
	}
	if o.LastUsedWriteRate == 0 {
		o.LastUsedWriteRate = 20
	}
	if o.LastUsedInterval < 0 || o.LastUsedFlush < 0 || o.LastUsedWriteRate < 0 {
		return errors.New("the lastUsedAt interval, flush period and write rate must be positive")
	}
	if o.ShutdownDelay == 0 {
		o.ShutdownDelay = 5 * time.Second
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.PanelListen != "" && o.Panel == nil {
		return errors.New("a panel address was given without a panel handler")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return nil
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
	api := &handler{
		index:   idx,
		prefix:  opts.KeyPrefix,
		clock:   opts.Clock,
		ready:   &synced,
		limiter: newFailureLimiter(opts.FailureRate, opts.FailureBurst, opts.RateLimitClients),
		trusted: opts.TrustedProxies,
		log:     log.WithName("http"),
	}
	servers := []*http.Server{newHTTPServer(api)}
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
