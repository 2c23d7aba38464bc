//go:build cluster

package cluster

import (
	"testing"
)

// TestChart is the life of a release, in order: each step needs the ones before it, so the
// first failure ends the test (after logging what explains it).
func TestChart(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			s.diagnose(t)
		}
	})
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"helm install", testInstall},
		{"pods as the chart says", testPodsAsDeclared},
		{"panel through its Service", testPanel},
		{"client flow through the Service", testClientFlow},
		{"renewal windows through the webhook", testRenewalWindowWebhook},
		{"automatic renewal under load", testRenewalUnderLoad},
		{"leader failover", testFailover},
		{"rolling upgrade under load", testUpgrade},
		{"no key in logs or Events", testNoLeaks},
		{"panel with single sign-on", testPanelSSO},
		{"helm uninstall", testUninstall},
		{"kustomize install", testKustomize},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			t.Fatalf("%q failed; the later steps need it", step.name)
		}
	}
}
