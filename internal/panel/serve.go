package panel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/healthz"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/probes"
)

// Serve runs the panel of the configuration c alone until ctx is done, then fails readiness,
// waits shutdownDelay and drains open requests. It watches no objects and holds no cache: a
// panel failure or overload stays in its own process, away from /v1, and its identity needs
// only "create" on tokenreviews. c is defaulted and validated first, as the command does.
func Serve(ctx context.Context, c *configv1alpha1.PanelConfiguration, deps Deps) error {
	l := deps.Listener
	h, err := func() (*handler, error) {
		if err := config.Complete(c); err != nil {
			return nil, fmt.Errorf("panel: %w", err)
		}
		return newHandler(&c.PanelSettings, c.TrustedProxies, deps)
	}()
	if err != nil {
		if l != nil { // given, and never to be served
			_ = l.Close()
		}
		return err
	}
	log := h.deps.Logger
	if l == nil {
		if l, err = frontdoor.Listen(*c.Listen); err != nil {
			return fmt.Errorf("listening on %s for the panel: %w", *c.Listen, err)
		}
	}
	endpoints := []frontdoor.Endpoint{frontdoor.HTTP(l, frontdoor.PanelLimits.Behind(h.proxies), h)}
	var draining atomic.Bool
	if addr := *c.HealthProbeBindAddress; addr != "" {
		pl, err := frontdoor.Listen(addr)
		if err != nil {
			_ = l.Close()
			return fmt.Errorf("listening on %s for the probes: %w", addr, err)
		}
		var checks probes.Probes
		_ = checks.AddHealthz("ping", healthz.Ping) // the first of its name: cannot fail
		_ = checks.AddReadyz("serving", func(*http.Request) error {
			if draining.Load() {
				return errors.New("shutting down")
			}
			return nil
		})
		endpoints = append(endpoints, checks.Endpoint(pl))
	}
	return frontdoor.Group{
		Endpoints:       endpoints,
		Draining:        &draining,
		ShutdownDelay:   c.ShutdownDelay.Duration,
		ShutdownTimeout: c.ShutdownTimeout.Duration,
		Log:             log,
	}.Run(ctx)
}
