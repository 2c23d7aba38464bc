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
	"github.com/switchboard-dev/switchboard/internal/frontdoor/ctrlhost"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/logging"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// DefaultLeaderElectionID names the Lease the senders compete for: one sends at a time.
const DefaultLeaderElectionID = "switchboard-webhooks.switchboard.dev"

// Deps are what the sender takes besides its configuration (the operator's: its webhooks
// section, and the settings the sender shares with the operator): what only a process (or a
// test) has. The zero value of each field is the process's own.
type Deps struct {
	// RESTConfig reaches the Kubernetes API server (required); the configuration's kubeAPIQPS and
	// kubeAPIBurst limit the sender's copy of it.
	RESTConfig *rest.Config
	// Schedule is the delay before each attempt (webhookdelivery.DefaultSchedule when nil):
	// tests shorten it.
	Schedule []time.Duration
	// RootCAs verify endpoints' certificates (the system's when nil): tests' receivers.
	RootCAs *x509.CertPool
	// Clock tells when messages fall due (the real clock when nil).
	Clock clock.Clock
	// Logger logs (controller-runtime's when unset), capped at internal/logging's verbosity.
	Logger logr.Logger
	// SkipControllerNameValidation lets several senders run in one process (tests).
	SkipControllerNameValidation bool
}

// CacheOptions are what the sender caches: KeyWebhooks everywhere (without tenants' labels
// and annotations), the outboxes of the system namespace, and the signing secrets' copies of
// the signing namespace. It reads no other Secret, and holds no right to: none in the system
// namespace, none in tenants'.
func CacheOptions(system, signing string) cache.Options {
	copies := labels.SelectorFromSet(labels.Set{keysecret.LabelComponent: keysecret.ComponentSigning})
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
// mirror, leader-elected, with its probes and metrics served through the front door. c, the
// operator's configuration, is defaulted and validated first, as the command does.
func NewManager(c *configv1alpha1.OperatorConfiguration, deps Deps) (manager.Manager, error) {
	if err := internalconfig.Complete(c); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	if deps.RESTConfig == nil {
		return nil, errors.New("webhooks: no Kubernetes client configuration")
	}
	w, system := &c.Webhooks, c.SystemNamespace
	policy, err := webhookdelivery.PolicyOf(w)
	if err != nil {
		return nil, err
	}
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	if deps.Logger.GetSink() == nil {
		deps.Logger = ctrl.Log
	}
	log := logging.Capped(deps.Logger).WithName("webhooks")
	sender, err := webhookdelivery.NewSender(webhookdelivery.Options{
		Policy: policy, Timeout: w.AttemptTimeout.Duration, Schedule: deps.Schedule, Now: deps.Clock.Now, RootCAs: deps.RootCAs,
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	cfg := rest.CopyConfig(deps.RESTConfig)
	cfg.QPS, cfg.Burst = *c.KubeAPIQPS, int(*c.KubeAPIBurst)
	inner, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme.Scheme,
		Logger:                        log,
		Cache:                         CacheOptions(system, w.SigningNamespace),
		LeaderElection:                *c.LeaderElect,
		LeaderElectionID:              DefaultLeaderElectionID,
		LeaderElectionNamespace:       system,
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		Controller:                    config.Controller{SkipNameValidation: ptr.To(deps.SkipControllerNameValidation)},
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: creating the manager: %w", err)
	}
	mgr := ctrlhost.Manager(inner, cfg, ctrlhost.Options{
		HealthProbeBindAddress: *c.HealthProbeBindAddress, MetricsBindAddress: *c.MetricsBindAddress,
		MetricsSecure: *c.MetricsSecure, Logger: log,
	})
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	d := &dispatcher{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), cache: mgr.GetCache(), sender: sender, policy: policy,
		system: system, signing: w.SigningNamespace, global: int(*w.Concurrency), perNS: int(*w.PerNamespaceConcurrency), clock: deps.Clock, log: log,
		wakeups: make(chan struct{}, 1), inflight: map[string]bool{}, nsBusy: map[string]int{},
		holds: map[string]time.Time{}, written: map[string]int32{},
	}
	if err := mgr.Add(d); err != nil {
		return nil, err
	}
	status := &statusReconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), system: system}
	if err := status.setup(mgr, crcontroller.Options{SkipNameValidation: ptr.To(deps.SkipControllerNameValidation)}); err != nil {
		return nil, fmt.Errorf("webhooks: setting up the status mirror: %w", err)
	}
	return mgr, nil
}

// Run runs the sender of the configuration c until ctx is done.
func Run(ctx context.Context, c *configv1alpha1.OperatorConfiguration, deps Deps) error {
	mgr, err := NewManager(c, deps)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
