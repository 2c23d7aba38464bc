// Package server hosts the API server: it wires the parts and serves them until told to stop.
// It decides nothing and lists nothing itself:
//
//   - internal/server/indexfeed fills the in-memory index (package keyindex) from informers;
//   - internal/server/keycheck decides every request (the key, its state, audience, source ranges, the
//     failure limiter and the rate limit);
//   - internal/server/v1api serves the API port (/v1 and /openapi.yaml), and internal/server/authz the
//     gateways' checks (Envoy's ext_authz over gRPC, forward-auth over HTTP), each an adapter
//     over the decision;
//   - internal/server/lastused writes keys' lastUsedAt back;
//   - internal/server/leakreceiver records GitHub's reports of leaked keys as LeakReports.
//
// Run builds them from Options and hosts them: listeners behind their front doors, the manager
// of metrics and probes, readiness until the index has synced, the gRPC server of ext_authz
// (TLS, health) and the shutdown that drains them. It imports neither the index, the rate
// limiter nor the key format (TestHostsOnly).
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
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/probes"
	"github.com/switchboard-dev/switchboard/internal/logging"
	"github.com/switchboard-dev/switchboard/internal/server/apierror"
	"github.com/switchboard-dev/switchboard/internal/server/authz"
	"github.com/switchboard-dev/switchboard/internal/server/indexfeed"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/lastused"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
	"github.com/switchboard-dev/switchboard/internal/server/v1api"
)

// Run serves until ctx is done, then fails readiness, waits ShutdownDelay, drains open requests
// and stops the cache. It returns an error when it cannot start or a listener fails. It owns
// opts.Listener and the authz listeners: whatever it returns, they are closed.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	// Listeners opened (or given) are closed on every return before they are served; from then
	// on the serving group closes them.
	var listeners []net.Listener
	for _, l := range []net.Listener{opts.Listener, opts.AuthzGRPCListener, opts.AuthzHTTPListener, opts.LeakReportsListener} {
		if l != nil {
			listeners = append(listeners, l)
		}
	}
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	opts.Default()
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("server options: %w", err)
	}
	log := ctrl.Log.WithName("server")
	if opts.Logger != nil {
		log = *opts.Logger
	}
	// The manager's and the panel's requests carry this logger: nothing above V(5) (Secret bodies).
	log = logging.Capped(log)
	var synced, draining atomic.Bool
	feed, err := indexfeed.New(ctx, cfg, indexfeed.Options{SystemNamespace: opts.SystemNamespace, Logger: log.WithName("index")})
	if err != nil {
		return err
	}
	checker, err := keycheck.New(keycheck.Config{
		Index: feed.Index(), Ready: &synced, KeyPrefix: opts.KeyPrefix, Clock: opts.Clock,
		TrustedProxies: opts.TrustedProxies, PeersAreProxies: opts.PeersAreProxies,
		FailureRate: opts.FailureRate, FailureBurst: opts.FailureBurst, FailureClients: opts.RateLimitClients,
		RateLimitRedis: opts.RateLimitRedis, RateLimitRedisPassword: opts.RateLimitRedisPassword,
		RateLimitRedisTimeout: opts.RateLimitRedisTimeout, Logger: log.WithName("rate-limit"),
	})
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, log)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	var checks probes.Probes
	if err := checks.AddHealthz("ping", healthz.Ping); err != nil {
		return err
	}
	if err := checks.AddReadyz("index", func(*http.Request) error {
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

	apiListener := opts.Listener
	if apiListener == nil {
		if apiListener, err = frontdoor.Listen(opts.Listen); err != nil {
			return fmt.Errorf("listening on %s: %w", opts.Listen, err)
		}
		listeners = append(listeners, apiListener)
	}
	api := v1api.New(v1api.Config{
		Checker: checker, Index: feed.Index(), Audience: opts.Audience,
		MaxInFlightBytesPerNamespace: opts.MaxInFlightBytesPerNamespace, Logger: log.WithName("http"),
	})
	endpoints := []frontdoor.Endpoint{frontdoor.HTTP(apiListener, apiLimits(&opts), api)}
	if opts.PanelListen != "" {
		l, err := frontdoor.Listen(opts.PanelListen)
		if err != nil {
			return fmt.Errorf("listening on %s for the panel: %w", opts.PanelListen, err)
		}
		listeners = append(listeners, l)
		endpoints = append(endpoints, frontdoor.HTTP(l, frontdoor.PanelLimits.Behind(opts.TrustedProxies), opts.Panel))
	}
	authzEndpoints, onSynced, err := authzEndpoints(ctx, checker, &opts, &listeners, log)
	if err != nil {
		return err
	}
	endpoints = append(endpoints, authzEndpoints...)
	leaks, err := leakReportsEndpoint(cfg, feed, mgr, &synced, &opts, &listeners, log)
	if err != nil {
		return err
	}
	if leaks != nil {
		endpoints = append(endpoints, leaks.endpoint)
	}
	observed, err := probeAndMetricsEndpoints(ctx, cfg, &opts, &checks, &listeners, log)
	if err != nil {
		return err
	}
	endpoints = append(endpoints, observed...)

	// The cache outlives ctx until the listeners have drained, so draining requests are answered.
	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMgr()
	mgrFailed := make(chan error, 2)
	mgrDone, informersDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(mgrDone)
		if err := mgr.Start(mgrCtx); err != nil {
			mgrFailed <- fmt.Errorf("running the manager: %w", err)
		}
	}()
	go func() {
		defer close(informersDone)
		if err := feed.Start(mgrCtx); err != nil {
			mgrFailed <- fmt.Errorf("running the cache: %w", err)
		}
	}()
	go waitSynced(mgrCtx, feed.HasSynced, &synced, onSynced, log)
	go lastused.New(feed.Index(), mgr.GetClient(), lastused.Options{
		Clock: opts.Clock, Interval: opts.LastUsedInterval, Flush: opts.LastUsedFlush, WriteRate: opts.LastUsedWriteRate,
		Logger: log.WithName("last-used"),
	}).Run(mgrCtx)
	go checker.Run(mgrCtx)
	if leaks != nil {
		go leaks.receiver.Run(mgrCtx) // the catch-up, when an organization is configured
	}
	listeners = nil // the group serves and closes them now
	runErr := frontdoor.Group{
		Endpoints:       endpoints,
		Draining:        &draining,
		ShutdownDelay:   opts.ShutdownDelay,
		ShutdownTimeout: opts.ShutdownTimeout,
		Failed:          mgrFailed,
		Log:             log,
	}.Run(ctx)
	stopMgr()
	<-mgrDone
	<-informersDone
	return runErr
}

// waitSynced marks the server ready once every informer has delivered its initial list to the
// index. Until then /v1 answers 503: a key must never be judged against a partial index.
func waitSynced(ctx context.Context, hasSynced func() bool, synced *atomic.Bool, onSynced func(), log logr.Logger) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	nextLog := start.Add(30 * time.Second)
	for {
		if hasSynced() {
			synced.Store(true)
			onSynced()
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

// authzEndpoints are the authorization listeners that opts asks for (gRPC ext_authz, HTTP
// forward-auth), appending those it opens to listeners, and what to call once the index has
// synced (gRPC health then says SERVING).
func authzEndpoints(ctx context.Context, checker *keycheck.Checker, opts *Options, listeners *[]net.Listener, log logr.Logger) ([]frontdoor.Endpoint, func(), error) {
	var endpoints []frontdoor.Endpoint
	onSynced := func() {}
	listen := func(given net.Listener, addr, what string) (net.Listener, error) {
		if given != nil { // already among listeners
			return given, nil
		}
		if addr == "" {
			return nil, nil
		}
		l, err := frontdoor.Listen(addr)
		if err != nil {
			return nil, fmt.Errorf("listening on %s for %s: %w", addr, what, err)
		}
		*listeners = append(*listeners, l)
		return l, nil
	}
	l, err := listen(opts.AuthzGRPCListener, opts.AuthzGRPCListen, "ext_authz (gRPC)")
	if err != nil {
		return nil, nil, err
	}
	if l != nil {
		e, setServing, err := newExtAuthz(ctx, l, checker, opts, log.WithName("ext-authz"))
		if err != nil {
			return nil, nil, err
		}
		endpoints, onSynced = append(endpoints, e), setServing
	}
	if l, err = listen(opts.AuthzHTTPListener, opts.AuthzHTTPListen, "forward-auth"); err != nil {
		return nil, nil, err
	}
	if l != nil {
		// Gateways' connections, kept in time as the API's and bounded in number: any pod that
		// reaches the port may connect, so one client address holds at most its share, but for
		// the gateways named in --trusted-proxies, which carry many clients' requests.
		limits := frontdoor.ForwardAuthLimits.Behind(opts.TrustedProxies)
		limits.ConnLimits = limits.WithBounds(opts.AuthzHTTPMaxConnections, opts.AuthzHTTPMaxConnectionsPerClient)
		endpoints = append(endpoints, frontdoor.HTTP(l, limits, authz.NewForwardAuth(checker, log.WithName("forward-auth"))))
	}
	return endpoints, onSynced, nil
}

// leakListener is the leak reports listener's endpoint and its receiver, whose Run lists an
// organization's open alerts.
type leakListener struct {
	endpoint frontdoor.Endpoint
	receiver *leakreceiver.Receiver
}

// leakReportsEndpoint is the leak reports listener when opts asks for one (nil otherwise),
// appending the listener it opens to listeners: GitHub's reports, behind the front door's
// connection bounds, recorded with the server's client once the index has synced; its client
// addresses judged by the trusted proxies, as /v1's are; its catch-up holding a Lease with cfg.
func leakReportsEndpoint(cfg *rest.Config, feed *indexfeed.Feed, mgr ctrl.Manager, synced *atomic.Bool, opts *Options, listeners *[]net.Listener, log logr.Logger) (*leakListener, error) {
	l := opts.LeakReportsListener
	if l == nil {
		if opts.LeakReportsListen == "" {
			return nil, nil
		}
		var err error
		if l, err = frontdoor.Listen(opts.LeakReportsListen); err != nil {
			return nil, fmt.Errorf("listening on %s for leak reports: %w", opts.LeakReportsListen, err)
		}
		*listeners = append(*listeners, l)
	}
	lr := opts.LeakReports
	lr.Index, lr.Client, lr.Namespace, lr.KeyPrefix, lr.Clock = feed.Index(), mgr.GetClient(), opts.SystemNamespace, opts.KeyPrefix, opts.Clock
	lr.TrustedProxies, lr.Ready = opts.TrustedProxies, synced.Load
	lr.Logger = log.WithName("leak-reports")
	if lr.CatchUp.Organization != "" {
		leases, err := coordinationv1client.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("leak reports: a client of Leases: %w", err)
		}
		lr.CatchUp.Leases = leases
	}
	recv, err := leakreceiver.New(lr)
	if err != nil {
		return nil, err
	}
	// The door reads the body; the receiver's bound is the door's, and the receiver refuses,
	// before a byte of it is read, a request without a signature GitHub could have made or from
	// an address that spent its budget.
	limits := frontdoor.LeakReportLimits.Behind(opts.TrustedProxies)
	limits.MaxBody, limits.BeforeBody = recv.MaxBody(), recv.BeforeBody
	return &leakListener{endpoint: frontdoor.HTTP(l, limits, recv), receiver: recv}, nil
}

// msgBodyNotAllowed is the message of the /v1 door's refusal of a request with a body.
const msgBodyNotAllowed = "The request carries a body, and no /v1 route reads one: send requests without a body (no Content-Length other than 0, no Transfer-Encoding)."

// apiLimits are the /v1 listener's: its handlers read no body, so a request that carries one is
// refused before them (413 BODY_NOT_ALLOWED) and its connection closed.
func apiLimits(opts *Options) frontdoor.HTTPLimits {
	limits := frontdoor.APILimits.Behind(opts.TrustedProxies)
	limits.ConnLimits = limits.WithBounds(opts.MaxConnections, opts.MaxConnectionsPerClient)
	limits.BodyRefusal = &frontdoor.Refusal{
		Status: http.StatusRequestEntityTooLarge,
		Header: http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}, "X-Content-Type-Options": {"nosniff"}},
		Body:   apierror.JSON(apierror.CodeBodyNotAllowed, msgBodyNotAllowed),
	}
	return limits
}
