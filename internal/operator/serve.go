package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/metricsauth"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/probes"
)

// drain bounds how long the operator's listeners wait for open requests once told to stop.
const drain = 5 * time.Second

// FrontDoor says what a manager wrapped by WithFrontDoor serves: its probes and metrics, each
// at its address ("": not served).
type FrontDoor struct {
	// HealthProbeBindAddress serves /healthz and /readyz.
	HealthProbeBindAddress string
	// MetricsBindAddress serves controller-runtime's metrics registry.
	MetricsBindAddress string
	// MetricsSecure serves them over HTTPS to callers RBAC allows to get /metrics.
	MetricsSecure bool
	// Logger logs the listeners' failures.
	Logger logr.Logger
}

// WithFrontDoor returns mgr serving the probes and metrics door asks for through the front
// door, as the operator's does: for the other controller-runtime processes (the webhook
// sender). mgr must have been built with its own listeners off (Metrics.BindAddress and
// HealthProbeBindAddress "0").
func WithFrontDoor(mgr manager.Manager, cfg *rest.Config, door FrontDoor) manager.Manager {
	return &frontdoorManager{Manager: mgr, cfg: cfg, door: door}
}

// frontdoorManager is the operator's manager with its probes and metrics served through the
// front door (frontdoor.Doors: probes, metrics). controller-runtime's own listeners for them
// are off (HealthProbeBindAddress and Metrics.BindAddress "0"): it offers no hook to bound
// their connections. The manager's health checks are added to the probes served here.
type frontdoorManager struct {
	manager.Manager
	cfg    *rest.Config
	door   FrontDoor
	probes probes.Probes
}

// AddHealthzCheck adds a liveness check to the probes served at the door's HealthProbeBindAddress.
func (m *frontdoorManager) AddHealthzCheck(name string, check healthz.Checker) error {
	return m.probes.AddHealthz(name, check)
}

// AddReadyzCheck adds a readiness check to the probes served at the door's HealthProbeBindAddress.
func (m *frontdoorManager) AddReadyzCheck(name string, check healthz.Checker) error {
	return m.probes.AddReadyz(name, check)
}

// Start serves the probes and metrics, from before the manager starts (as controller-runtime
// serves its own) until it has stopped, and runs the manager until ctx is done. A listener that
// fails stops the manager.
func (m *frontdoorManager) Start(ctx context.Context) error {
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	endpoints, err := m.endpoints(serveCtx)
	if err != nil {
		return err
	}
	if len(endpoints) == 0 {
		return m.Manager.Start(ctx)
	}
	mgrCtx, stopMgr := context.WithCancelCause(ctx)
	defer stopMgr(nil)
	served := make(chan error, 1)
	go func() {
		err := frontdoor.Group{Endpoints: endpoints, ShutdownTimeout: drain, Log: m.door.Logger}.Run(serveCtx)
		if err != nil {
			stopMgr(err)
		}
		served <- err
	}()
	err = m.Manager.Start(mgrCtx)
	stopServing()
	return errors.Join(err, <-served)
}

// endpoints are the probes and metrics the door asks for, listening; ctx bounds the metrics'
// certificate watching.
func (m *frontdoorManager) endpoints(ctx context.Context) ([]frontdoor.Endpoint, error) {
	var endpoints []frontdoor.Endpoint
	fail := func(err error) ([]frontdoor.Endpoint, error) {
		for _, e := range endpoints {
			_ = e.Listener.Close()
		}
		return nil, err
	}
	if m.door.HealthProbeBindAddress != "" {
		l, err := frontdoor.Listen(m.door.HealthProbeBindAddress)
		if err != nil {
			return fail(fmt.Errorf("listening on %s for the probes: %w", m.door.HealthProbeBindAddress, err))
		}
		endpoints = append(endpoints, m.probes.Endpoint(l))
	}
	if m.door.MetricsBindAddress != "" {
		l, err := frontdoor.Listen(m.door.MetricsBindAddress)
		if err != nil {
			return fail(fmt.Errorf("listening on %s for the metrics: %w", m.door.MetricsBindAddress, err))
		}
		e, err := metricsauth.Endpoint(ctx, m.cfg, l, metricsauth.Options{Secure: m.door.MetricsSecure, Logger: m.door.Logger.WithName("metrics")})
		if err != nil {
			_ = l.Close()
			return fail(err)
		}
		endpoints = append(endpoints, e)
	}
	return endpoints, nil
}
