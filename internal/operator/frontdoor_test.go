//go:build !unit

package operator_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/operator/keyadmission"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestListenersGoThroughTheFrontDoor (issue 29): every listener of the operator (probes,
// metrics, the reveal endpoint, the admission webhook) keeps the front door's bound on a
// request's header block, which controller-runtime's own listeners set at 1 MiB; and the probes
// answer /readyz/<check> as controller-runtime's did.
func TestListenersGoThroughTheFrontDoor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	system := env.Namespace(t, "doors")
	probes, metrics, reveal, webhook := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	url := "https://" + webhook + keyadmission.Path
	vwc := keyadmission.Configuration("doors-"+system, admissionregistrationv1.WebhookClientConfig{URL: &url})
	if err := env.Client.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), vwc) })
	c := testenv.OperatorConfiguration(system)
	c.HealthProbeBindAddress, c.MetricsBindAddress, c.MetricsSecure = &probes, &metrics, ptr.To(true)
	c.Reveal = configv1alpha1.RevealEndpoint{BindAddress: reveal, Names: []string{"127.0.0.1"}}
	c.Webhook = configv1alpha1.WebhookEndpoint{BindAddress: webhook, Names: []string{"127.0.0.1"}, ConfigurationName: vwc.Name}
	startManager(t, c, operator.Deps{Namespaces: []string{system}})

	// Ready once the endpoints' certificate is published.
	testenv.Eventually(t, time.Minute, "readiness", func() error {
		status, err := testenv.HeaderBlockStatus(probes, "/readyz/serving-certificate", false, 100)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("status %d", status)
		}
		return err
	})
	for _, l := range []struct {
		name, addr, path string
		tls              bool
		want             int // the answer to a request within the bound
	}{
		{"probes", probes, "/healthz", false, http.StatusOK},
		{"metrics", metrics, "/metrics", true, http.StatusUnauthorized},
		{"reveal", reveal, "/reveal", true, http.StatusUnauthorized},
		{"webhook", webhook, "/nothing", true, http.StatusNotFound},
	} {
		t.Run(l.name, func(t *testing.T) {
			if status, err := testenv.HeaderBlockStatus(l.addr, l.path, l.tls, frontdoor.MaxHeaderBlock); err != nil || status != l.want {
				t.Errorf("a header block at the bound: %d (%v), want %d", status, err, l.want)
			}
			if status, err := testenv.HeaderBlockStatus(l.addr, l.path, l.tls, frontdoor.MaxHeaderBlock+1); err != nil || status != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("a header block past the bound: %d (%v), want 431", status, err)
			}
		})
	}
}
