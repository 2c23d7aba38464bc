// Package ctrlhost hosts a controller-runtime process's listeners through the front door: its
// probes and metrics, which controller-runtime would serve itself with no connection bound and
// no hook to add one, and whatever else the process declares (the operator's admission webhook
// and reveal endpoint), from before the manager starts (as controller-runtime serves its own)
// until it has stopped. The operator and the webhook sender are hosted so.
package ctrlhost

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/metricsauth"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/probes"
)

// drain bounds how long the listeners wait for open requests once told to stop.
const drain = 5 * time.Second

// Options say what a hosted manager serves, each listener at its address ("": not served).
type Options struct {
	// HealthProbeBindAddress serves /healthz and /readyz: the manager's health checks.
	HealthProbeBindAddress string
	// MetricsBindAddress serves controller-runtime's metrics registry.
	MetricsBindAddress string
	// MetricsSecure serves them over HTTPS to callers RBAC allows to get /metrics.
	MetricsSecure bool
	// Listeners are the process's others, served beside them.
	Listeners []frontdoor.Listener
	// Logger logs the listeners' failures.
	Logger logr.Logger
}

// Manager returns mgr with its listeners served as opts say, through the front door. mgr must
// have been built with its own listeners off (Metrics.BindAddress and HealthProbeBindAddress
// "0"); the health checks added to the manager returned are the probes served.
func Manager(mgr manager.Manager, cfg *rest.Config, opts Options) manager.Manager {
	return &hosted{Manager: mgr, cfg: cfg, opts: opts}
}

// hosted is a manager whose listeners are served through the front door.
type hosted struct {
	manager.Manager
	cfg    *rest.Config
	opts   Options
	probes probes.Probes
}

// AddHealthzCheck adds a liveness check to the probes served at HealthProbeBindAddress.
func (m *hosted) AddHealthzCheck(name string, check healthz.Checker) error {
	return m.probes.AddHealthz(name, check)
}

// AddReadyzCheck adds a readiness check to the probes served at HealthProbeBindAddress.
func (m *hosted) AddReadyzCheck(name string, check healthz.Checker) error {
	return m.probes.AddReadyz(name, check)
}

// Start opens the listeners, then serves them and runs the manager until ctx is done. A
// listener that fails stops the manager.
func (m *hosted) Start(ctx context.Context) error {
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	metrics, err := metricsauth.Listener(serveCtx, m.cfg, m.opts.MetricsBindAddress,
		metricsauth.Options{Secure: m.opts.MetricsSecure, Logger: m.opts.Logger.WithName("metrics")})
	if err != nil {
		return err
	}
	group, err := frontdoor.Group{
		Listeners:       append([]frontdoor.Listener{m.probes.Listener(m.opts.HealthProbeBindAddress), metrics}, m.opts.Listeners...),
		ShutdownTimeout: drain,
		Log:             m.opts.Logger,
	}.Open()
	if err != nil {
		return err
	}
	mgrCtx, stopMgr := context.WithCancelCause(ctx)
	defer stopMgr(nil)
	served := make(chan error, 1)
	go func() {
		err := group.Run(serveCtx)
		if err != nil {
			stopMgr(err)
		}
		served <- err
	}()
	err = m.Manager.Start(mgrCtx)
	stopServing()
	return errors.Join(err, <-served)
}
