// Package operator runs switchboard's controllers in a controller-runtime manager.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/controller/connection"
	"github.com/switchboard-dev/switchboard/internal/controller/keywebhook"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/ctrlhost"
	"github.com/switchboard-dev/switchboard/internal/logging"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// DefaultLeaderElectionID names the Lease the replicas compete for, in the system namespace.
const DefaultLeaderElectionID = "switchboard-operator.switchboard.dev"

// EventSource is the reporting controller of the operator's Events.
const EventSource = "switchboard-operator"

// Deps are what the operator takes besides its configuration: what only a process (or a test)
// has. The zero value of each field is the process's own.
type Deps struct {
	// RESTConfig reaches the Kubernetes API server (required); the configuration's kubeAPIQPS and
	// kubeAPIBurst limit the operator's copy of it.
	RESTConfig *rest.Config
	// Logger logs for the manager and the controllers (default: controller-runtime's). Whatever
	// it is given, it logs nothing above internal/logging's verbosity (client-go logs Secret
	// bodies at V(8)).
	Logger logr.Logger
	// Clock tells the time for expiry, grace and reveal deadlines, and dates the endpoints'
	// serving certificates (default: the real clock). Tests pass a fake clock.
	Clock clock.PassiveClock
	// WebhookClock tells the time the admission webhook follows renewal windows from (default:
	// Clock). It is apart from Clock so that a test can put the webhook at a named instant
	// while the certificates the real API server checks keep the real time.
	WebhookClock clock.PassiveClock
	// Namespaces restricts what the manager watches (default: all). Tests that run several
	// operators against one API server give each its own namespaces; the system namespace is
	// added.
	Namespaces []string
	// SkipControllerNameValidation lets several managers in one process register the same
	// controllers (tests).
	SkipControllerNameValidation bool
}

// settings are one operator's configuration, completed, and its deps, with the process's own
// where they left a field unset.
type settings struct {
	c      *configv1alpha1.OperatorConfiguration
	deps   Deps
	policy webhookdelivery.Policy
}

// complete defaults and validates c (the command's rules, for every embedder too) and fills
// deps' unset fields.
func complete(c *configv1alpha1.OperatorConfiguration, deps Deps) (*settings, error) {
	if err := config.Complete(c); err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	if deps.RESTConfig == nil {
		return nil, errors.New("operator: no Kubernetes client configuration")
	}
	policy, err := webhookdelivery.PolicyOf(&c.Webhooks)
	if err != nil {
		return nil, err
	}
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	if deps.WebhookClock == nil {
		deps.WebhookClock = deps.Clock
	}
	if deps.Logger.GetSink() == nil {
		deps.Logger = ctrl.Log
	}
	deps.Logger = logging.Capped(deps.Logger)
	return &settings{c: c, deps: deps, policy: policy}, nil
}

// minRenewal is the least interval between renewals the configuration sets (0 and 0: none).
func (s *settings) minRenewal() renewalinterval.Minimum {
	return renewalinterval.Minimum{Floor: s.c.MinRenewalInterval.Duration, Percentage: *s.c.MinRenewalIntervalPercentage}
}

// keyLife is the configuration's unusedAfter and minimum renewal interval as the APIKey
// reconciler reads them: it takes a zero for a default of its own, older than the
// configuration, whose 0 is "never" and "none"; it reads a negative so.
func (s *settings) keyLife() (unusedAfter time.Duration, minRenewal renewalinterval.Minimum) {
	unusedAfter, minRenewal = s.c.UnusedAfter.Duration, s.minRenewal()
	if unusedAfter == 0 {
		unusedAfter = -1
	}
	if minRenewal == (renewalinterval.Minimum{}) {
		minRenewal.Floor = -1
	}
	return unusedAfter, minRenewal
}

// NewManager returns a manager with the operator's controllers, not started yet. Started, it
// also serves the listeners the configuration c asks for (probes, metrics, the admission
// webhook, the reveal endpoint) through the front door (internal/frontdoor/ctrlhost), and,
// leading, publishes its version in the system namespace (PublishVersion). c is defaulted and
// validated first.
func NewManager(c *configv1alpha1.OperatorConfiguration, deps Deps) (manager.Manager, error) {
	s, err := complete(c, deps)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(s.deps.RESTConfig)
	cfg.QPS, cfg.Burst = *c.KubeAPIQPS, int(*c.KubeAPIBurst)
	keeper, err := newKeeper(cfg, s)
	if err != nil {
		return nil, err
	}
	log := s.deps.Logger
	hooksMux := http.NewServeMux()
	inner, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:                 hooks{Server: webhook.NewServer(webhook.Options{WebhookMux: hooksMux})},
		Scheme:                        scheme.Scheme,
		Logger:                        log,
		Cache:                         CacheOptions(c.SystemNamespace, c.Webhooks.SigningNamespace, s.deps.Namespaces),
		LeaderElection:                *c.LeaderElect,
		LeaderElectionID:              DefaultLeaderElectionID,
		LeaderElectionNamespace:       c.SystemNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Served by the host, through the front door.
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             crconfig.Controller{SkipNameValidation: ptr.To(s.deps.SkipControllerNameValidation)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	listeners, err := endpoints(cfg, s, keeper, hooksMux)
	if err != nil {
		return nil, err
	}
	mgr := ctrlhost.Manager(inner, cfg, ctrlhost.Options{
		HealthProbeBindAddress: *c.HealthProbeBindAddress, MetricsBindAddress: *c.MetricsBindAddress, MetricsSecure: *c.MetricsSecure,
		Listeners: listeners, Logger: log,
	})
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := setupControllers(context.Background(), mgr, s); err != nil {
		return nil, err
	}
	if err := addEndpoints(mgr, s, keeper); err != nil {
		return nil, err
	}
	if err := mgr.Add(versionPublisher{mgr: mgr, namespace: c.SystemNamespace, log: log.WithName("version")}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// setupControllers adds the controllers to mgr.
func setupControllers(ctx context.Context, mgr manager.Manager, s *settings) error {
	c := s.c
	ctrlOpts := controller.Options{}
	if s.deps.SkipControllerNameValidation {
		ctrlOpts.SkipNameValidation = ptr.To(true)
	}
	conns := &connection.Reconciler{Client: mgr.GetClient(), ControllerOptions: ctrlOpts}
	if err := conns.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the Connection controller: %w", err)
	}
	keyCtrlOpts := ctrlOpts
	keyCtrlOpts.MaxConcurrentReconciles = int(*c.KeyWorkers)
	unusedAfter, minRenewal := s.keyLife()
	keys := &apikeyctrl.Reconciler{
		Client:              mgr.GetClient(),
		APIReader:           mgr.GetAPIReader(),
		Recorder:            mgr.GetEventRecorder(EventSource),
		Clock:               s.deps.Clock,
		SystemNamespace:     c.SystemNamespace,
		KeyPrefix:           c.KeyPrefix,
		RevealTTL:           c.RevealTTL.Duration,
		ExpiryWarning:       c.ExpiryWarning.Duration,
		UnusedAfter:         unusedAfter,
		MinRenewalInterval:  minRenewal,
		LeakReportRetention: c.LeakReportRetention.Duration,
		ControllerOptions:   keyCtrlOpts,
	}
	if err := keys.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the APIKey controller: %w", err)
	}
	webhooks := &keywebhook.Reconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		SystemNamespace:   c.SystemNamespace,
		SigningNamespace:  c.Webhooks.SigningNamespace,
		Policy:            s.policy,
		ControllerOptions: ctrlOpts,
	}
	if err := webhooks.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the KeyWebhook controller: %w", err)
	}
	return registerKeyMetrics(mgr, int(*c.KeyMetricsLimit))
}

// Run runs the operator of the configuration c until ctx is done.
func Run(ctx context.Context, c *configv1alpha1.OperatorConfiguration, deps Deps) error {
	mgr, err := NewManager(c, deps)
	if err != nil {
		return err
	}
	started := make(chan error, 1)
	go func() { started <- mgr.Start(ctx) }()
	// The manager waits for its caches to sync before anything else. Told to stop before they
	// have (an API server out of reach, missing RBAC), it never returns, and spins
	// (kubernetes-sigs/controller-runtime#3440): a Pod would burn a core until it is killed.
	// So whether they synced is watched here, and if they had not when ctx ended, Run returns.
	synced := make(chan bool, 1)
	go func() { synced <- mgr.GetCache().WaitForCacheSync(ctx) }()
	select {
	case err := <-started:
		return err
	case ok := <-synced:
		if !ok { // ctx ended; had they synced by then?
			check, cancel := context.WithTimeout(context.WithoutCancel(ctx), 200*time.Millisecond)
			ok = mgr.GetCache().WaitForCacheSync(check)
			cancel()
		}
		if ok {
			return <-started
		}
	}
	select {
	case err := <-started: // it did stop
		return err
	case <-time.After(time.Second):
		return errors.New("stopped before the operator's caches synced (is the API server reachable, and does the operator have its RBAC?)")
	}
}
