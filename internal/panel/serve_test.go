//go:build !unit

package panel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestServeAlone runs the panel as its own process does (`switchboard panel`): probes answer,
// a person signs in and works, and cancelling stops it cleanly.
func TestServeAlone(t *testing.T) {
	ns := env.Namespace(t, "serve")
	token := grant(t, ns, "owner", ownerRules)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probes := testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- panel.Serve(ctx, &configv1alpha1.PanelConfiguration{HealthProbeBindAddress: &probes, Shutdown: configv1alpha1.Shutdown{ShutdownDelay: &metav1.Duration{}}},
			panel.Deps{RESTConfig: env.Config, Listener: l})
	}()
	testenv.Eventually(t, 10*time.Second, "the panel ready", func() error {
		resp, err := http.Get("http://" + probes + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %d", resp.StatusCode)
		}
		return nil
	})
	newVisitorAt(t, "http://"+l.Addr().String(), &http.Client{}).signIn(token, ns)
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve stopped with %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("Serve did not stop")
	}
}
