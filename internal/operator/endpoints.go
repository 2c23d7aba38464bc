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
	"net"
	"net/http"
	"strconv"
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
func newKeeper(cfg *rest.Config, opts Options) (*servingcert.Keeper, error) {
	var names []string
	var targets []servingcert.Target
	if opts.RevealBindAddress == "0" && opts.WebhookBindAddress == "0" {
		return nil, nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	if opts.RevealBindAddress != "0" {
		names = append(names, opts.RevealNames...)
		targets = append(targets, servingcert.ConfigMapBundle(c, client.ObjectKey{Namespace: opts.SystemNamespace, Name: opts.RevealBundle}))
	}
	if opts.WebhookBindAddress != "0" {
		names = append(names, opts.WebhookNames...)
		targets = append(targets, servingcert.WebhookCABundle(c, opts.WebhookConfiguration))
	}
	return servingcert.NewKeeper(names, targets, opts.Clock, opts.Logger.WithName("serving-certificate")), nil
}

// webhookServer is the admission webhook's server, serving with keeper's certificate; nil
// (none) when the webhook is not served.
func webhookServer(opts Options, keeper *servingcert.Keeper) webhook.Server {
	if opts.WebhookBindAddress == "0" {
		return nil
	}
	mux := http.NewServeMux()
	return &frontdoorWebhook{
		Server: webhook.NewServer(webhook.Options{WebhookMux: mux}),
		mux:    mux,
		addr:   opts.WebhookBindAddress,
		tls:    &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: keeper.GetCertificate},
		log:    opts.Logger.WithName("webhook"),
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

// addEndpoints adds the keeper, the reveal endpoint and the webhook to mgr as opts ask, with a
// readiness check that fails until the certificate is published.
func addEndpoints(cfg *rest.Config, mgr manager.Manager, opts Options, keeper *servingcert.Keeper) error {
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
	if opts.WebhookBindAddress != "0" {
		mgr.GetWebhookServer().Register(keyadmission.Path, keyadmission.Handler(opts.WebhookClock, opts.minRenewal()))
	}
	if opts.RevealBindAddress == "0" {
		return nil
	}
	srv, err := reveal.NewServer(cfg, reveal.Options{
		BindAddress:    opts.RevealBindAddress,
		GetCertificate: keeper.GetCertificate,
		Logger:         opts.Logger.WithName("reveal"),
	})
	if err != nil {
		return err
	}
	return mgr.Add(srv)
}

// hostPort splits a bind address ":9443" or "127.0.0.1:9443".
func hostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	return host, port, nil
}
