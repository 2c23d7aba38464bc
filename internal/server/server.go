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
// Run builds them from the ServerConfiguration and hosts them: listeners behind their front
// doors, the manager of metrics and probes, readiness until the index has synced, the gRPC
// server of ext_authz (TLS, health) and the shutdown that drains them. It imports neither the index, the rate
// limiter nor the key format (TestHostsOnly).
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
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/probes"
	"github.com/switchboard-dev/switchboard/internal/logging"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/apierror"
	"github.com/switchboard-dev/switchboard/internal/server/authz"
	"github.com/switchboard-dev/switchboard/internal/server/indexfeed"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/lastused"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
	"github.com/switchboard-dev/switchboard/internal/server/v1api"
)

// Run serves the configuration c until ctx is done, then fails readiness, waits shutdownDelay,
// drains open requests and stops the cache. It returns an error when it cannot start (c is
// defaulted and validated first, as the command does) or a listener fails. It owns the
// listeners of deps: whatever it returns, they are closed.
func Run(ctx context.Context, c *configv1alpha1.ServerConfiguration, deps Deps) error {
	h := &host{c: c, deps: deps}
	// The listeners given are closed on every return: the serving group closes them too (twice
	// is harmless), but a Run that fails before it must as well.
	defer func() {
		for _, l := range []net.Listener{deps.Listener, deps.AuthzGRPCListener, deps.AuthzHTTPListener, deps.LeakReportsListener} {
			if l != nil {
				_ = l.Close()
			}
		}
	}()
	if err := h.complete(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	cfg, log := deps.RESTConfig, h.log
	var synced, draining atomic.Bool
	feed, err := indexfeed.New(ctx, cfg, indexfeed.Options{SystemNamespace: c.SystemNamespace, Logger: log.WithName("index")})
	if err != nil {
		return err
	}
	redisPassword, err := redisPassword(c.RateLimitRedis.PasswordFile)
	if err != nil {
		return err
	}
	workloads, err := h.newWorkloadTokens()
	if err != nil {
		return err
	}
	checker, err := keycheck.New(keycheck.Config{
		Index: feed.Index(), Ready: &synced, KeyPrefix: c.KeyPrefix, Clock: h.deps.Clock,
		TrustedProxies: h.proxies, PeersAreProxies: c.PeersAreProxies,
		FailureRate: *c.AuthFailureLimit.Rate, FailureBurst: int(*c.AuthFailureLimit.Burst), FailureClients: int(*c.AuthFailureLimit.Clients),
		RateLimitRedis: c.RateLimitRedis.URL, RateLimitRedisPassword: redisPassword,
		RateLimitRedisTimeout: c.RateLimitRedis.Timeout.Duration, Logger: log.WithName("rate-limit"),
		CreditsOnRedisFailure: c.RateLimitCredits.OnRedisFailure, CreditReplicas: int(*c.RateLimitCredits.Replicas),
		Tokens: workloads.tokens(), TrustDomain: c.Binding.TrustDomain, ClientCertHeader: c.Binding.ClientCertHeader,
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
			return errors.New("the index (and, with binding.serviceAccountTokens, the pods) has not synced")
		}
		return nil
	}); err != nil {
		return err
	}

	api := v1api.New(v1api.Config{
		Checker: checker, Index: feed.Index(), Audience: c.Audience,
		MaxInFlightBytesPerNamespace: *c.MaxInFlightBytesPerNamespace, Logger: log.WithName("http"),
	})
	extAuthz, onSynced, err := h.extAuthz(ctx, checker)
	if err != nil {
		return err
	}
	leaks, leakReports, err := h.leakReports(feed, mgr, &synced)
	if err != nil {
		return err
	}
	metrics, err := h.metrics(ctx)
	if err != nil {
		return err
	}
	mgrFailed := make(chan error, 2)
	group, err := frontdoor.Group{
		Listeners: []frontdoor.Listener{
			{Door: "api", Address: *c.Listen, Given: deps.Listener, Limits: h.apiLimits(), Handler: api},
			h.panel(), extAuthz, h.forwardAuth(checker), leakReports, checks.Listener(*c.HealthProbeBindAddress), metrics,
		},
		Draining: &draining, ShutdownDelay: c.ShutdownDelay.Duration, ShutdownTimeout: c.ShutdownTimeout.Duration, Failed: mgrFailed, Log: log,
	}.Open()
	if err != nil {
		return err
	}

	// The cache outlives ctx until the listeners have drained, so draining requests are answered.
	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMgr()
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
	go workloads.run(mgrCtx, h)
	go waitSynced(mgrCtx, func() bool { return feed.HasSynced() && workloads.hasSynced() }, &synced, onSynced, log)
	go lastused.New(feed.Index(), mgr.GetClient(), lastused.Options{
		Clock: h.deps.Clock, Interval: c.LastUsed.Interval.Duration, Flush: h.deps.LastUsedFlush, WriteRate: *c.LastUsed.WritesPerSecond,
		Logger: log.WithName("last-used"), CreditBalance: checker.CreditBalance,
	}).Run(mgrCtx)
	go checker.Run(mgrCtx)
	if leaks != nil {
		go leaks.Run(mgrCtx) // the catch-up, when an organization is configured
	}
	runErr := group.Run(ctx)
	stopMgr()
	<-mgrDone
	<-informersDone
	return runErr
}

// host is one Run: its configuration, what it was given and the configuration's lists read.
type host struct {
	c                 *configv1alpha1.ServerConfiguration
	deps              Deps
	proxies, gateways []netip.Prefix
	log               logr.Logger
}

// complete defaults and validates the configuration, checks what it needs of deps and fills
// the rest of deps with the process's own.
func (h *host) complete() error {
	if err := config.Complete(h.c); err != nil {
		return err
	}
	if h.deps.RESTConfig == nil {
		return errors.New("no Kubernetes client configuration")
	}
	if p := h.c.Panel; p != nil && p.Listen != "" && h.deps.PanelHandler == nil {
		return errors.New("panel.listen is set, and no panel handler was given to serve it")
	}
	var err error
	if h.proxies, err = config.ParsePrefixes(h.c.TrustedProxies); err != nil {
		return err
	}
	if h.gateways, err = config.ParsePrefixes(h.c.Authz.GRPC.Gateways); err != nil {
		return err
	}
	if h.deps.Clock == nil {
		h.deps.Clock = clock.RealClock{}
	}
	if h.deps.LastUsedFlush == 0 {
		h.deps.LastUsedFlush = defaultLastUsedFlush
	}
	h.log = h.deps.Logger
	if h.log.GetSink() == nil {
		h.log = ctrl.Log.WithName("server")
	}
	// The manager's and the panel's requests carry this logger: nothing above V(5) (Secret bodies).
	h.log = logging.Capped(h.log)
	return nil
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
			// Usually RBAC: the server must list and watch Connections and APIKeys cluster-wide,
			// Secrets in the system namespace, and pods (binding.serviceAccountTokens).
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

// panel is the listener of the panel beside /v1 (panel.listen), serving deps.PanelHandler.
func (h *host) panel() frontdoor.Listener {
	l := frontdoor.Listener{Door: "panel", Limits: ptr.To(frontdoor.PanelLimits.Behind(h.proxies)), Handler: h.deps.PanelHandler}
	if p := h.c.Panel; p != nil {
		l.Address = p.Listen
	}
	return l
}

// forwardAuth is the forward-auth listener (authz.http.listen). Gateways' connections are kept
// in time as the API's and bounded in number: any pod that reaches the port may connect, so one
// client address holds at most its share, but for the gateways named in trustedProxies, which
// carry many clients' requests.
func (h *host) forwardAuth(checker *keycheck.Checker) frontdoor.Listener {
	l := frontdoor.Listener{Door: "forward-auth", Address: h.c.Authz.HTTP.Listen, Given: h.deps.AuthzHTTPListener}
	if !l.Served() {
		return l
	}
	limits := frontdoor.ForwardAuthLimits.Behind(h.proxies)
	limits.ConnLimits = limits.WithBounds(int(*h.c.Authz.HTTP.MaxConnections), int(*h.c.Authz.HTTP.MaxConnectionsPerClient))
	l.Limits, l.Handler = &limits, authz.NewForwardAuth(checker, h.log.WithName("forward-auth"))
	return l
}

// leakReports is the leak reports listener, and its receiver (whose Run lists an
// organization's open alerts) when the configuration asks for one (nil otherwise): GitHub's
// reports, behind the front door's connection bounds, recorded with the server's client once
// the index has synced; its client addresses judged by the trusted proxies, as /v1's are; its
// catch-up holding a Lease.
func (h *host) leakReports(feed *indexfeed.Feed, mgr ctrl.Manager, synced *atomic.Bool) (*leakreceiver.Receiver, frontdoor.Listener, error) {
	lr := &h.c.LeakReports
	l := frontdoor.Listener{Door: "leak-reports", Address: lr.Listen, Given: h.deps.LeakReportsListener}
	if !l.Served() {
		return nil, l, nil
	}
	a := &lr.OrganizationAlerts
	rc := leakreceiver.Config{
		Index: feed.Index(), Client: mgr.GetClient(), Namespace: h.c.SystemNamespace, KeyPrefix: h.c.KeyPrefix,
		TrustedProxies: h.proxies, Ready: synced.Load, Clock: h.deps.Clock, Logger: h.log.WithName("leak-reports"),
		Partner: lr.Partner.Enabled, PublicKeysURL: lr.Partner.PublicKeysURL, APIBaseURL: a.APIBaseURL,
		MaxBody: *lr.MaxBodyBytes, MaxBatch: int(*lr.MaxBatch), Rate: *lr.Rate, Burst: int(*lr.Burst),
		ClientRate: *lr.UnverifiedLimit.Rate, ClientBurst: int(*lr.UnverifiedLimit.Burst), Clients: int(*lr.UnverifiedLimit.Clients),
		Replays: int(*lr.Replays.Entries), ReplayTTL: lr.Replays.TTL.Duration,
		CatchUp: leakreceiver.CatchUp{
			Organization: a.Organization, Period: a.CatchUp.Period.Duration, MaxCalls: int(*a.CatchUp.MaxRequests), Clock: h.deps.CatchUpClock,
		},
	}
	if err := leakReportSecrets(lr, &rc); err != nil {
		return nil, l, err
	}
	if a.Organization != "" {
		leases, err := coordinationv1client.NewForConfig(h.deps.RESTConfig)
		if err != nil {
			return nil, l, fmt.Errorf("leak reports: a client of Leases: %w", err)
		}
		rc.CatchUp.Leases = leases
	}
	if h.deps.LeakReceiver != nil {
		h.deps.LeakReceiver(&rc)
	}
	recv, err := leakreceiver.New(rc)
	if err != nil {
		return nil, l, err
	}
	// The door reads the body; the receiver's bound is the door's, and the receiver refuses,
	// before a byte of it is read, a request without a signature GitHub could have made or from
	// an address that spent its budget.
	limits := frontdoor.LeakReportLimits.Behind(h.proxies)
	limits.MaxBody, limits.BeforeBody = recv.MaxBody(), recv.BeforeBody
	l.Limits, l.Handler = &limits, recv
	return recv, l, nil
}

// msgBodyNotAllowed is the message of the /v1 door's refusal of a request with a body.
const msgBodyNotAllowed = "The request carries a body, and no /v1 route reads one: send requests without a body (no Content-Length other than 0, no Transfer-Encoding)."

// apiLimits are the /v1 listener's: its handlers read no body, so a request that carries one is
// refused before them (413 BODY_NOT_ALLOWED) and its connection closed.
func (h *host) apiLimits() *frontdoor.HTTPLimits {
	limits := frontdoor.APILimits.Behind(h.proxies)
	limits.ConnLimits = limits.WithBounds(int(*h.c.MaxConnections), int(*h.c.MaxConnectionsPerClient))
	limits.BodyRefusal = &frontdoor.Refusal{
		Status: http.StatusRequestEntityTooLarge,
		Header: http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}, "X-Content-Type-Options": {"nosniff"}},
		Body:   apierror.JSON(apicode.BodyNotAllowed, msgBodyNotAllowed),
	}
	return &limits
}
