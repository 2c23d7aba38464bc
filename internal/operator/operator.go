// Package operator runs switchboard's controllers in a controller-runtime manager.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/controller/connection"
	"github.com/switchboard-dev/switchboard/internal/controller/keywebhook"
	"github.com/switchboard-dev/switchboard/internal/logging"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// Defaults of Options.
const (
	// DefaultRevealTTL is how long an unclaimed reveal Secret lives.
	DefaultRevealTTL = configv1alpha1.DefaultRevealTTL
	// DefaultLeaderElectionID names the Lease the replicas compete for.
	DefaultLeaderElectionID = "switchboard-operator.switchboard.dev"
	// DefaultQPS and DefaultBurst raise client-go's 5/10, which throttles a busy operator.
	DefaultQPS = configv1alpha1.DefaultKubeAPIQPS
	// DefaultBurst is the client's burst above DefaultQPS.
	DefaultBurst = configv1alpha1.DefaultKubeAPIBurst
	// DefaultKeyWorkers is how many APIKeys are reconciled at once. Issuing a key is four
	// sequential API writes, so one worker caps throughput at the API server's round-trip time.
	DefaultKeyWorkers = configv1alpha1.DefaultKeyWorkers
	// DefaultMetricsBindAddress and DefaultHealthProbeBindAddress are where the command serves
	// metrics and probes (the Options' zero values disable them, for tests and switchboard dev).
	DefaultMetricsBindAddress     = configv1alpha1.DefaultOperatorMetricsBindAddress
	DefaultHealthProbeBindAddress = configv1alpha1.DefaultOperatorHealthProbeBindAddress
	// DefaultExpiryWarning and DefaultUnusedAfter: the ExpiringSoon and Unused conditions.
	DefaultExpiryWarning = apikeyctrl.DefaultExpiryWarning
	DefaultUnusedAfter   = apikeyctrl.DefaultUnusedAfter
	// DefaultLeakReportRetention is how long a LeakReport is kept once its key is refused.
	DefaultLeakReportRetention = configv1alpha1.DefaultLeakReportRetention
	// DefaultKeyMetricsLimit bounds the per-key series of the key metrics (metrics.go).
	DefaultKeyMetricsLimit = configv1alpha1.DefaultKeyMetricsLimit
	// DefaultRevealBundle is the ConfigMap of the reveal endpoint's certificates.
	DefaultRevealBundle = configv1alpha1.DefaultRevealCAConfigMap
	// DefaultWebhookConfiguration is the webhook configuration of the admission webhook.
	DefaultWebhookConfiguration = configv1alpha1.DefaultWebhookConfigurationName
	// EventSource is the reporting controller of the operator's Events.
	EventSource = "switchboard-operator"
)

// Options configure the operator. The zero value of each field is replaced by its default.
type Options struct {
	// SystemNamespace holds the hash Secrets (default switchboard-system).
	SystemNamespace string
	// KeyPrefix begins every generated key (default "sb").
	KeyPrefix string
	// RevealTTL is how long an unclaimed reveal Secret lives (default 1h).
	RevealTTL time.Duration
	// ExpiryWarning is how long before a key's end that nothing renews ExpiringSoon turns True.
	ExpiryWarning time.Duration
	// UnusedAfter is how long without a use makes a key Unused (negative: never).
	UnusedAfter time.Duration
	// MinRenewalInterval is the least interval between two automatic renewals of a key, whatever
	// its lifecycle asks: every renewal writes the key's Secrets, which reach etcd and every
	// server replica. The admission webhook refuses lifecycles that renew more often; keys
	// stored before are renewed at this interval (RenewalLimited). Default 5m; negative: no
	// floor (MinRenewalIntervalPercentage still holds).
	MinRenewalInterval time.Duration
	// MinRenewalIntervalPercentage raises MinRenewalInterval to this percentage of a key's
	// lifetime, from 1 to 99 (default 10: a 90-day key renews at most every 9 days; negative:
	// none).
	MinRenewalIntervalPercentage int32
	// WebhookPolicy is the webhook network policy KeyWebhooks' URLs are checked against: the
	// webhook sender's. Its Denied networks default to the configuration's (the private ones)
	// when nil; empty, only the always refused networks are.
	WebhookPolicy webhookdelivery.Policy
	// WebhookSigningNamespace holds the copies of KeyWebhooks' signing secrets, and nothing
	// else: the webhook sender may read Secrets there only (default SystemNamespace followed by
	// "-webhook-signing"; not SystemNamespace). Copies an older operator left in SystemNamespace
	// are deleted.
	WebhookSigningNamespace string
	// LeakReportRetention is how long a LeakReport is kept once its key is refused (default
	// 720h; negative: until its key is gone, which deletes it too).
	LeakReportRetention time.Duration
	// KeyMetricsLimit bounds the APIKeys that get series of their own in the key metrics;
	// past it only the aggregates are exported (negative: no per-key series at all).
	KeyMetricsLimit int

	// LeaderElection makes replicas elect one active operator; Run's callers turn it on.
	LeaderElection bool
	// LeaderElectionID names the Lease (default DefaultLeaderElectionID).
	LeaderElectionID string
	// LeaderElectionNamespace holds the Lease (default SystemNamespace).
	LeaderElectionNamespace string
	// MetricsBindAddress serves Prometheus metrics; "" or "0" disables it.
	MetricsBindAddress string
	// MetricsSecure serves them over HTTPS to authenticated callers RBAC allows to get /metrics
	// (internal/frontdoor/metricsauth), as the chart and config/ run the operator.
	MetricsSecure bool
	// HealthProbeBindAddress serves /healthz and /readyz; "" or "0" disables it.
	HealthProbeBindAddress string
	// RevealBindAddress serves the reveal endpoint (internal/operator/reveal), through which the panel in
	// impersonate mode claims keys for people; "" or "0" disables it.
	RevealBindAddress string
	// RevealBundle names the ConfigMap, in SystemNamespace, where each replica publishes the
	// endpoint's certificate (default DefaultRevealBundle).
	RevealBundle string
	// RevealNames are the DNS names (or IP addresses) of the endpoint's certificates: its
	// Service's.
	RevealNames []string
	// WebhookBindAddress serves the APIKey admission webhook (internal/operator/keyadmission), which
	// checks renewal windows and the interval between renewals; "" or "0" disables it.
	WebhookBindAddress string
	// WebhookConfiguration names the ValidatingWebhookConfiguration whose caBundle each replica
	// adds its certificate to (default DefaultWebhookConfiguration).
	WebhookConfiguration string
	// WebhookNames are the DNS names (or IP addresses) the API server calls the webhook by.
	WebhookNames []string
	// QPS and Burst limit the client (defaults DefaultQPS and DefaultBurst).
	QPS float32
	// Burst is the client's burst.
	Burst int
	// KeyWorkers is how many APIKeys are reconciled concurrently (default DefaultKeyWorkers).
	// The workqueue never hands one APIKey to two workers. Connections keep one worker: their
	// id-uniqueness check reads the cache and must not race with another assignment.
	KeyWorkers int

	// Logger logs for the manager and the controllers (default: controller-runtime's global logger).
	Logger logr.Logger
	// Clock tells the time for expiry, grace and reveal deadlines, and dates the endpoints'
	// serving certificates (default: the real clock). Tests pass a fake clock.
	Clock clock.PassiveClock
	// WebhookClock tells the time the admission webhook follows renewal windows from (default:
	// Clock). It is apart from Clock so that a test can put the webhook at a named instant
	// while the certificates the real API server checks keep the real time.
	WebhookClock clock.PassiveClock
	// Namespaces restricts what the manager watches (default: all). Tests that run several
	// operators against one API server give each its own namespaces; SystemNamespace is added.
	Namespaces []string
	// SkipControllerNameValidation lets several managers in one process register the same
	// controllers (tests).
	SkipControllerNameValidation bool
}

// Default sets o's zero fields to their defaults, and caps its logger (client-go logs Secret
// bodies at V(8): internal/logging). It is the one place the operator's defaults are applied:
// the command, switchboard dev and tests all go through NewManager or SetupWithManager.
func (o *Options) Default() {
	if o.SystemNamespace == "" {
		o.SystemNamespace = switchboardv1alpha1.DefaultSystemNamespace
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = apikey.DefaultPrefix
	}
	if o.RevealTTL == 0 {
		o.RevealTTL = DefaultRevealTTL
	}
	if o.ExpiryWarning == 0 {
		o.ExpiryWarning = DefaultExpiryWarning
	}
	if o.UnusedAfter == 0 {
		o.UnusedAfter = DefaultUnusedAfter
	}
	if o.MinRenewalInterval == 0 {
		o.MinRenewalInterval = renewalinterval.Default.Floor
	}
	if o.MinRenewalIntervalPercentage == 0 {
		o.MinRenewalIntervalPercentage = renewalinterval.Default.Percentage
	}
	if o.LeakReportRetention == 0 {
		o.LeakReportRetention = DefaultLeakReportRetention
	}
	if o.KeyMetricsLimit == 0 {
		o.KeyMetricsLimit = DefaultKeyMetricsLimit
	}
	if o.WebhookSigningNamespace == "" {
		o.WebhookSigningNamespace = configv1alpha1.DefaultWebhookSigningNamespace(o.SystemNamespace)
	}
	if o.WebhookPolicy.Denied == nil {
		for _, n := range configv1alpha1.DefaultWebhookDeniedNetworks() {
			o.WebhookPolicy.Denied = append(o.WebhookPolicy.Denied, netip.MustParsePrefix(n))
		}
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = DefaultLeaderElectionID
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = o.SystemNamespace
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = "0"
	}
	if o.HealthProbeBindAddress == "" {
		o.HealthProbeBindAddress = "0"
	}
	if o.RevealBindAddress == "" {
		o.RevealBindAddress = "0"
	}
	if o.RevealBundle == "" {
		o.RevealBundle = DefaultRevealBundle
	}
	if o.WebhookBindAddress == "" {
		o.WebhookBindAddress = "0"
	}
	if o.WebhookConfiguration == "" {
		o.WebhookConfiguration = DefaultWebhookConfiguration
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.KeyWorkers == 0 {
		o.KeyWorkers = DefaultKeyWorkers
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.WebhookClock == nil {
		o.WebhookClock = o.Clock
	}
	if o.Logger.GetSink() == nil {
		o.Logger = ctrl.Log
	}
	o.Logger = logging.Capped(o.Logger)
}

// Validate says what is wrong with o once defaulted, naming the flag of each option; nil when
// nothing is.
func (o *Options) Validate() error {
	var errs []error
	if err := apikey.ValidatePrefix(o.KeyPrefix); err != nil {
		errs = append(errs, fmt.Errorf("--key-prefix: %w", err))
	}
	if o.RevealTTL < 0 {
		errs = append(errs, fmt.Errorf("--reveal-ttl: the reveal TTL must be positive, got %s", o.RevealTTL))
	}
	if o.ExpiryWarning < 0 {
		errs = append(errs, fmt.Errorf("--expiry-warning must be positive, got %s", o.ExpiryWarning))
	}
	if o.MinRenewalIntervalPercentage > 99 {
		errs = append(errs, fmt.Errorf("--min-renewal-interval-percentage: at most 99 (percent of a key's lifetime), got %d", o.MinRenewalIntervalPercentage))
	}
	if o.QPS < 0 || o.Burst < 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if o.RevealBindAddress != "0" && len(o.RevealNames) == 0 {
		errs = append(errs, errors.New("--reveal-names: the reveal endpoint's certificate needs the names it is reached by (its Service's DNS names)"))
	}
	if o.WebhookBindAddress != "0" {
		if len(o.WebhookNames) == 0 {
			errs = append(errs, errors.New("--webhook-names: the webhook's certificate needs the names the API server calls it by (its Service's DNS names)"))
		}
		if _, _, err := hostPort(o.WebhookBindAddress); err != nil {
			errs = append(errs, fmt.Errorf("--webhook-bind-address: %w", err))
		}
	}
	if o.WebhookSigningNamespace == o.SystemNamespace {
		errs = append(errs, errors.New("webhooks.signingNamespace: the signing secrets' copies need a namespace of their own, not the system namespace, whose every Secret the webhook sender could read"))
	}
	if o.KeyWorkers < 0 {
		errs = append(errs, fmt.Errorf("--key-workers: the number of key workers must be positive, got %d", o.KeyWorkers))
	}
	return errors.Join(errs...)
}

// minRenewal is the least interval between renewals that o sets.
func (o *Options) minRenewal() renewalinterval.Minimum {
	return renewalinterval.Minimum{Floor: o.MinRenewalInterval, Percentage: o.MinRenewalIntervalPercentage}
}

// complete is o defaulted and validated: what NewManager and SetupWithManager start from.
func (o Options) complete() (Options, error) {
	o.Default()
	return o, o.Validate()
}

// NewManager returns a manager with the operator's controllers, not started yet. Started, it
// also serves the probes and metrics opts ask for, through the front door (frontdoorManager),
// and, leading, publishes its version in the system namespace (PublishVersion).
func NewManager(cfg *rest.Config, opts Options) (manager.Manager, error) {
	opts, err := opts.complete()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	keeper, err := newKeeper(cfg, opts)
	if err != nil {
		return nil, err
	}
	inner, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:                 webhookServer(opts, keeper),
		Scheme:                        scheme.Scheme,
		Logger:                        opts.Logger,
		Cache:                         CacheOptions(opts),
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Served by frontdoorManager, through the front door.
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(opts.SkipControllerNameValidation)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	mgr := &frontdoorManager{Manager: inner, cfg: cfg, door: FrontDoor{
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		MetricsBindAddress:     opts.MetricsBindAddress,
		MetricsSecure:          opts.MetricsSecure,
		Logger:                 opts.Logger,
	}}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := setupControllers(context.Background(), mgr, opts); err != nil {
		return nil, err
	}
	if err := addEndpoints(cfg, mgr, opts, keeper); err != nil {
		return nil, err
	}
	if err := mgr.Add(versionPublisher{mgr: mgr, opts: opts}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// SetupWithManager adds the Connection and APIKey controllers to mgr. Other components' tests
// call it to run the real controllers in their own manager; give that manager CacheOptions.
func SetupWithManager(ctx context.Context, mgr manager.Manager, opts Options) error {
	opts, err := opts.complete()
	if err != nil {
		return err
	}
	return setupControllers(ctx, mgr, opts)
}

// setupControllers adds the controllers to mgr with opts, completed already.
func setupControllers(ctx context.Context, mgr manager.Manager, opts Options) error {
	ctrlOpts := controller.Options{}
	if opts.SkipControllerNameValidation {
		ctrlOpts.SkipNameValidation = ptr.To(true)
	}
	conns := &connection.Reconciler{Client: mgr.GetClient(), ControllerOptions: ctrlOpts}
	if err := conns.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the Connection controller: %w", err)
	}
	keyCtrlOpts := ctrlOpts
	keyCtrlOpts.MaxConcurrentReconciles = opts.KeyWorkers
	keys := &apikeyctrl.Reconciler{
		Client:              mgr.GetClient(),
		APIReader:           mgr.GetAPIReader(),
		Recorder:            mgr.GetEventRecorder(EventSource),
		Clock:               opts.Clock,
		SystemNamespace:     opts.SystemNamespace,
		KeyPrefix:           opts.KeyPrefix,
		RevealTTL:           opts.RevealTTL,
		ExpiryWarning:       opts.ExpiryWarning,
		UnusedAfter:         opts.UnusedAfter,
		MinRenewalInterval:  opts.minRenewal(),
		LeakReportRetention: opts.LeakReportRetention,
		ControllerOptions:   keyCtrlOpts,
	}
	if err := keys.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the APIKey controller: %w", err)
	}
	webhooks := &keywebhook.Reconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		SystemNamespace:   opts.SystemNamespace,
		SigningNamespace:  opts.WebhookSigningNamespace,
		Policy:            opts.WebhookPolicy,
		ControllerOptions: ctrlOpts,
	}
	if err := webhooks.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the KeyWebhook controller: %w", err)
	}
	return registerKeyMetrics(mgr, &opts)
}

// Run runs the operator until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if cfg == nil {
		return errors.New("operator: no Kubernetes client configuration")
	}
	mgr, err := NewManager(cfg, opts)
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
