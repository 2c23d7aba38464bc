package webhooksender

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	internalconfig "github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/controller/keywebhook"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/logging"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// DefaultLeaderElectionID names the Lease the senders compete for: one sends at a time.
const DefaultLeaderElectionID = "switchboard-webhooks.switchboard.dev"

// Options configure the sender; OptionsFromConfig reads them from the operator's configuration.
type Options struct {
	// SystemNamespace holds the outboxes and the Lease.
	SystemNamespace string
	// SigningNamespace holds the signing secrets' copies the operator makes, and nothing else:
	// the one namespace whose Secrets the sender reads (and may read).
	SigningNamespace string
	// Policy says which endpoints may be called.
	Policy webhookdelivery.Policy
	// Concurrency bounds the attempts in flight; PerNamespace those of one namespace's endpoints.
	Concurrency, PerNamespace int
	// AttemptTimeout bounds one attempt.
	AttemptTimeout time.Duration
	// Schedule is the delay before each attempt (webhookdelivery.DefaultSchedule when nil):
	// tests shorten it.
	Schedule []time.Duration
	// RootCAs verify endpoints' certificates (the system's when nil): tests' receivers.
	RootCAs *x509.CertPool
	// Clock tells when messages fall due (the real clock when nil).
	Clock clock.Clock

	// LeaderElection makes replicas elect one sender.
	LeaderElection bool
	// MetricsBindAddress, MetricsSecure and HealthProbeBindAddress: what the front door serves
	// ("" or "0": nothing).
	MetricsBindAddress     string
	MetricsSecure          bool
	HealthProbeBindAddress string
	// QPS and Burst limit the Kubernetes client (client-go's when 0).
	QPS   float32
	Burst int
	// Logger logs (controller-runtime's when unset).
	Logger logr.Logger
	// SkipControllerNameValidation lets several senders run in one process (tests).
	SkipControllerNameValidation bool
}

// OptionsFromConfig reads the sender's options from a defaulted, validated operator
// configuration: its webhooks section and the settings the sender shares with the operator.
func OptionsFromConfig(c *configv1alpha1.OperatorConfiguration) (Options, error) {
	policy, err := internalconfig.WebhookPolicy(&c.Webhooks)
	if err != nil {
		return Options{}, err
	}
	return Options{
		SystemNamespace:        c.SystemNamespace,
		SigningNamespace:       c.Webhooks.SigningNamespace,
		Policy:                 policy,
		Concurrency:            int(*c.Webhooks.Concurrency),
		PerNamespace:           int(*c.Webhooks.PerNamespaceConcurrency),
		AttemptTimeout:         c.Webhooks.AttemptTimeout.Duration,
		LeaderElection:         *c.LeaderElect,
		MetricsBindAddress:     *c.MetricsBindAddress,
		MetricsSecure:          *c.MetricsSecure,
		HealthProbeBindAddress: *c.HealthProbeBindAddress,
		QPS:                    *c.KubeAPIQPS,
		Burst:                  int(*c.KubeAPIBurst),
	}, nil
}

// CacheOptions are what the sender caches: KeyWebhooks everywhere (without tenants' labels
// and annotations), the outboxes of the system namespace, and the signing secrets' copies of
// the signing namespace. It reads no other Secret, and holds no right to: none in the system
// namespace, none in tenants'.
func CacheOptions(system, signing string) cache.Options {
	copies := labels.SelectorFromSet(labels.Set{keysecret.LabelComponent: keywebhook.ComponentSigning})
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:                     {Namespaces: map[string]cache.Config{signing: {LabelSelector: copies}}},
			&switchboardv1alpha1.WebhookOutbox{}: {Namespaces: map[string]cache.Config{system: {}}},
			&switchboardv1alpha1.KeyWebhook{}: {Transform: func(obj any) (any, error) {
				if o, ok := obj.(client.Object); ok {
					o.SetLabels(nil)
					o.SetAnnotations(nil)
					o.SetManagedFields(nil)
				}
				return obj, nil
			}},
		},
	}
}

// NewManager returns the sender's manager, not started: the dispatcher and the status
// mirror, leader-elected, with its probes and metrics served through the front door.
func NewManager(cfg *rest.Config, o Options) (manager.Manager, error) {
	if o.SystemNamespace == "" {
		return nil, errors.New("webhooks: no system namespace")
	}
	if o.SigningNamespace == "" || o.SigningNamespace == o.SystemNamespace {
		return nil, fmt.Errorf("webhooks: the signing secrets' copies need a namespace of their own (signing %q, system %q)", o.SigningNamespace, o.SystemNamespace)
	}
	if o.Concurrency < 1 || o.PerNamespace < 1 || o.PerNamespace > o.Concurrency {
		return nil, fmt.Errorf("webhooks: concurrency %d, per namespace %d: both at least 1, the second at most the first", o.Concurrency, o.PerNamespace)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = ctrl.Log
	}
	o.Logger = logging.Capped(o.Logger).WithName("webhooks")
	sender, err := webhookdelivery.NewSender(webhookdelivery.Options{
		Policy: o.Policy, Timeout: o.AttemptTimeout, Schedule: o.Schedule, Now: o.Clock.Now, RootCAs: o.RootCAs,
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	if o.QPS > 0 {
		cfg.QPS, cfg.Burst = o.QPS, o.Burst
	}
	inner, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme.Scheme,
		Logger:                        o.Logger,
		Cache:                         CacheOptions(o.SystemNamespace, o.SigningNamespace),
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              DefaultLeaderElectionID,
		LeaderElectionNamespace:       o.SystemNamespace,
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		Controller:                    config.Controller{SkipNameValidation: ptr.To(o.SkipControllerNameValidation)},
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: creating the manager: %w", err)
	}
	mgr := operator.WithFrontDoor(inner, cfg, operator.FrontDoor{
		HealthProbeBindAddress: o.HealthProbeBindAddress, MetricsBindAddress: o.MetricsBindAddress,
		MetricsSecure: o.MetricsSecure, Logger: o.Logger,
	})
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	d := &dispatcher{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), cache: mgr.GetCache(), sender: sender, policy: o.Policy,
		system: o.SystemNamespace, signing: o.SigningNamespace, global: o.Concurrency, perNS: o.PerNamespace, clock: o.Clock, log: o.Logger,
		wakeups: make(chan struct{}, 1), inflight: map[string]bool{}, nsBusy: map[string]int{},
		holds: map[string]time.Time{}, written: map[string]int32{},
	}
	if err := mgr.Add(d); err != nil {
		return nil, err
	}
	status := &statusReconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), system: o.SystemNamespace}
	if err := status.setup(mgr, crcontroller.Options{SkipNameValidation: ptr.To(o.SkipControllerNameValidation)}); err != nil {
		return nil, fmt.Errorf("webhooks: setting up the status mirror: %w", err)
	}
	return mgr, nil
}

// Run runs the sender until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	mgr, err := NewManager(cfg, o)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
