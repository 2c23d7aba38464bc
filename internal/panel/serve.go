package panel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/probes"
)

// Defaults of ServeOptions.
const (
	DefaultListen                 = configv1alpha1.DefaultPanelListen
	DefaultHealthProbeBindAddress = configv1alpha1.DefaultPanelHealthProbeBindAddress
	DefaultShutdownDelay          = configv1alpha1.DefaultShutdownDelay
	DefaultShutdownTimeout        = configv1alpha1.DefaultShutdownTimeout
)

// ServeOptions configure Serve, the panel as a process of its own (`switchboard panel`).
type ServeOptions struct {
	// Listen is the panel's address (default ":8083").
	Listen string
	// Listener, when set, is used instead of listening on Listen (tests pass a ":0" listener).
	Listener net.Listener
	// HealthProbeBindAddress serves /healthz and /readyz; "0" (or empty) disables it.
	HealthProbeBindAddress string
	// ShutdownDelay is how long readiness fails before the listener stops accepting (default
	// 5s; negative: none). ShutdownTimeout bounds the draining of open requests (default 30s).
	ShutdownDelay   time.Duration
	ShutdownTimeout time.Duration
}

// Default sets s's zero fields to their defaults.
func (s *ServeOptions) Default() {
	if s.Listen == "" {
		s.Listen = DefaultListen
	}
	if s.ShutdownDelay == 0 {
		s.ShutdownDelay = DefaultShutdownDelay
	}
	if s.ShutdownTimeout == 0 {
		s.ShutdownTimeout = DefaultShutdownTimeout
	}
}

// Serve runs the panel alone until ctx is done, then fails readiness, waits ShutdownDelay and
// drains open requests. It watches no objects and holds no cache: a panel failure or overload
// stays in its own process, away from /v1, and its identity needs only "create" on
// tokenreviews.
func Serve(ctx context.Context, cfg *rest.Config, opts Options, serve ServeOptions) error {
	serve.Default()
	h, err := newHandler(cfg, opts)
	if err != nil {
		return err
	}
	log := h.opts.Logger
	l := serve.Listener
	if l == nil {
		if l, err = frontdoor.Listen(serve.Listen); err != nil {
			return fmt.Errorf("listening on %s for the panel: %w", serve.Listen, err)
		}
	}
	endpoints := []frontdoor.Endpoint{frontdoor.HTTP(l, frontdoor.PanelLimits.Behind(h.opts.TrustedProxies), h)}
	var draining atomic.Bool
	if probes.Enabled(serve.HealthProbeBindAddress) {
		pl, err := frontdoor.Listen(serve.HealthProbeBindAddress)
		if err != nil {
			_ = l.Close()
			return fmt.Errorf("listening on %s for the probes: %w", serve.HealthProbeBindAddress, err)
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
		ShutdownDelay:   serve.ShutdownDelay,
		ShutdownTimeout: serve.ShutdownTimeout,
		Log:             log,
	}.Run(ctx)
}
