package operator

// The operator's HTTPS endpoints besides metrics: the reveal endpoint (the panel in impersonate
// mode) and the APIKey admission webhook (renewal windows), both served on every replica with
// one in-memory certificate published where their callers trust it (internal/operator/servingcert), and
// through the front door's doors (frontdoor.Doors: reveal, webhook).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/operator/keyadmission"
	"github.com/switchboard-dev/switchboard/internal/operator/reveal"
	"github.com/switchboard-dev/switchboard/internal/operator/servingcert"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// newKeeper returns the keeper of the serving certificate of the operator's HTTPS endpoints
// (the reveal endpoint, the admission webhook), published where their callers trust it; nil
// when neither is served.
func newKeeper(cfg *rest.Config, s *settings) (*servingcert.Keeper, error) {
	var names []string
	var targets []servingcert.Target
	reveal, webhook := &s.c.Reveal, &s.c.Webhook
	if reveal.BindAddress == "" && webhook.BindAddress == "" {
		return nil, nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	if reveal.BindAddress != "" {
		names = append(names, reveal.Names...)
		targets = append(targets, servingcert.ConfigMapBundle(c, client.ObjectKey{Namespace: s.c.SystemNamespace, Name: reveal.CAConfigMap}))
	}
	if webhook.BindAddress != "" {
		names = append(names, webhook.Names...)
		targets = append(targets, servingcert.WebhookCABundle(c, webhook.ConfigurationName))
	}
	return servingcert.NewKeeper(names, targets, s.deps.Clock, s.deps.Logger.WithName("serving-certificate")), nil
}

// webhookServer is the admission webhook's server, serving with keeper's certificate; nil
// (none) when the webhook is not served.
func webhookServer(s *settings, keeper *servingcert.Keeper) webhook.Server {
	if s.c.Webhook.BindAddress == "" {
		return nil
	}
	mux := http.NewServeMux()
	return &frontdoorWebhook{
		Server: webhook.NewServer(webhook.Options{WebhookMux: mux}),
		mux:    mux,
		addr:   s.c.Webhook.BindAddress,
		tls:    &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: keeper.GetCertificate},
		log:    s.deps.Logger.WithName("webhook"),
	}
}

// frontdoorWebhook is controller-runtime's webhook server, for its registry of hooks and their
// mux, served through the front door's webhook door: its own Start listens with tls.Listen,
// with no connection bound and 1 MiB of headers, and offers no hook on the listener.
type frontdoorWebhook struct {
	webhook.Server // Register, WebhookMux and NeedLeaderElection (false: every replica serves)
	mux            *http.ServeMux
	addr           string
	tls            *tls.Config
	log            logr.Logger
	listening      atomic.Bool
}

// Start serves the webhooks registered until ctx is done.
func (s *frontdoorWebhook) Start(ctx context.Context) error {
	l, err := frontdoor.Listen(s.addr)
	if err != nil {
		return fmt.Errorf("the admission webhook: %w", err)
	}
	s.listening.Store(true)
	limits := frontdoor.WebhookLimits
	// Failed handshakes (an API server given another caBundle) are the API server's to report.
	limits.ErrorLog = s.log.V(1)
	return frontdoor.HTTPS(l, limits, s.tls, s.mux).Serve(ctx, drain, s.log)
}

// StartedChecker passes once the webhook listens (connections wait in the listen queue until
// it serves them).
func (s *frontdoorWebhook) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.listening.Load() {
			return errors.New("the admission webhook is not listening yet")
		}
		return nil
	}
}

// addEndpoints adds the keeper, the reveal endpoint and the webhook to mgr as the configuration
// asks, with a readiness check that fails until the certificate is published.
func addEndpoints(cfg *rest.Config, mgr manager.Manager, s *settings, keeper *servingcert.Keeper) error {
	if keeper == nil {
		return nil
	}
	if err := mgr.Add(keeper); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("serving-certificate", func(*http.Request) error {
		select {
		case <-keeper.Ready():
			return nil
		default:
			return errors.New("the serving certificate is not published yet")
		}
	}); err != nil {
		return err
	}
	if s.c.Webhook.BindAddress != "" {
		mgr.GetWebhookServer().Register(keyadmission.Path, keyadmission.Handler(s.deps.WebhookClock, s.minRenewal()))
	}
	if s.c.Reveal.BindAddress == "" {
		return nil
	}
	srv, err := reveal.NewServer(cfg, reveal.Options{
		BindAddress:    s.c.Reveal.BindAddress,
		GetCertificate: keeper.GetCertificate,
		Logger:         s.deps.Logger.WithName("reveal"),
	})
	if err != nil {
		return err
	}
	return mgr.Add(srv)
}
