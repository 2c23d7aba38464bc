package operator

// The operator's HTTPS endpoints besides metrics: the reveal endpoint (the panel in impersonate
// mode) and the APIKey admission webhook (renewal windows), both served on every replica with
// one in-memory certificate published where their callers trust it (internal/operator/servingcert),
// and declared to the manager's host (internal/frontdoor/ctrlhost) with their doors
// (frontdoor.Doors: reveal, webhook).

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// hooks is controller-runtime's webhook server as the registry of the admission webhook's
// hooks alone: Register instruments each (controller-runtime's webhook metrics) on the mux the
// webhook listener serves. Its own Start would listen with tls.Listen, with no connection
// bound and 1 MiB of headers, so it serves nothing.
type hooks struct {
	webhook.Server // Register, WebhookMux and NeedLeaderElection (false: every replica serves)
}

// Start waits for ctx: the webhook listener serves the hooks.
func (hooks) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// endpoints are the listeners of the reveal endpoint and the admission webhook the
// configuration asks for, each with keeper's certificate; the webhook serves mux, on which the
// manager's webhook server registers its hooks.
func endpoints(cfg *rest.Config, s *settings, keeper *servingcert.Keeper, mux *http.ServeMux) ([]frontdoor.Listener, error) {
	if keeper == nil {
		return nil, nil
	}
	log := s.deps.Logger
	webhookLimits, revealLimits := frontdoor.WebhookLimits, frontdoor.RevealLimits
	// Failed handshakes (an API server given another caBundle, a caller that trusts another
	// bundle) are the callers' to report.
	webhookLimits.ErrorLog, revealLimits.ErrorLog = log.WithName("webhook").V(1), log.WithName("reveal").V(1)
	listeners := []frontdoor.Listener{{Door: "webhook", Address: s.c.Webhook.BindAddress, Limits: &webhookLimits,
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: keeper.GetCertificate}, Handler: mux}}
	if s.c.Reveal.BindAddress == "" {
		return listeners, nil
	}
	h, err := reveal.NewHandler(cfg, log.WithName("reveal"))
	if err != nil {
		return nil, err
	}
	return append(listeners, frontdoor.Listener{Door: "reveal", Address: s.c.Reveal.BindAddress, Limits: &revealLimits,
		TLS: &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: keeper.GetCertificate}, Handler: h}), nil
}

// addEndpoints adds the keeper and the webhook's hooks to mgr as the configuration asks, with a
// readiness check that fails until the certificate is published.
func addEndpoints(mgr manager.Manager, s *settings, keeper *servingcert.Keeper) error {
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
	return nil
}
