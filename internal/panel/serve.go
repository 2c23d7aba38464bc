package panel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"k8s.io/utils/ptr"
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
	h, err := func() (*handler, error) {
		if err := config.Complete(c); err != nil {
			return nil, fmt.Errorf("panel: %w", err)
		}
		return newHandler(&c.PanelSettings, c.TrustedProxies, deps)
	}()
	if err != nil {
		if deps.Listener != nil { // given, and never to be served
			_ = deps.Listener.Close()
		}
		return err
	}
	var draining atomic.Bool
	var checks probes.Probes
	_ = checks.AddHealthz("ping", healthz.Ping) // the first of its name: cannot fail
	_ = checks.AddReadyz("serving", func(*http.Request) error {
		if draining.Load() {
			return errors.New("shutting down")
		}
		return nil
	})
	return frontdoor.Group{
		Listeners: []frontdoor.Listener{
			{Door: "panel", Address: *c.Listen, Given: deps.Listener, Limits: ptr.To(frontdoor.PanelLimits.Behind(h.proxies)), Handler: h},
			checks.Listener(*c.HealthProbeBindAddress),
		},
		Draining:        &draining,
		ShutdownDelay:   c.ShutdownDelay.Duration,
		ShutdownTimeout: c.ShutdownTimeout.Duration,
		Log:             h.deps.Logger,
	}.Run(ctx)
}
