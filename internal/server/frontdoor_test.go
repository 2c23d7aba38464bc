//go:build !unit

package server

import (
	"net/http"
	"testing"

	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestProbesAndMetricsGoThroughTheFrontDoor (issue 29): the server's probe and metrics
// listeners keep the front door's bound on a request's header block, which controller-runtime's
// own set at 1 MiB; and the probes answer /readyz/<check> as controller-runtime's did.
func TestProbesAndMetricsGoThroughTheFrontDoor(t *testing.T) {
	probes, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t)
	startServer(t, nil, &sc{HealthProbeBindAddress: &probes, Metrics: configv1alpha1.Metrics{MetricsBindAddress: &metrics, MetricsSecure: ptr.To(true)}}, Deps{}, true)
	for _, l := range []struct {
		name, addr, path string
		tls              bool
		want             int // the answer to a request within the bound
	}{
		{"probes", probes, "/readyz/index", false, http.StatusOK},
		{"metrics", metrics, "/metrics", true, http.StatusUnauthorized},
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
