//go:build cluster

package cluster

import (
	"testing"
)

// TestChart is the life of a release, in order: most steps need the ones before them, so the
// first failure of one ends the test (after logging what explains it). A step that works in a
// namespace of its own and leaves nothing the others need is apart: its failure fails the test
// and the steps after it still run.
func TestChart(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			s.diagnose(t)
		}
	})
	steps := []struct {
		name  string
		run   func(t *testing.T)
		apart bool
	}{
		{"release into the registry", testRelease, false},
		{"signatures", testSignatures, true},
		{"helm install", testInstall, false},
		{"pods as the chart says", testPodsAsDeclared, false},
		{"panel through its Service", testPanel, false},
		{"client flow through the Service", testClientFlow, false},
		{"keys bound to a workload", testWorkloadBinding, true},
		{"leaked key: refused, replaced, its Deployment rolled", testLeakRollout, true},
		{"renewal windows through the webhook", testRenewalWindowWebhook, true},
		{"automatic renewal under load", testRenewalUnderLoad, false},
		{"grace that ends on evidence", testGraceEndsOnEvidence, true},
		{"leader failover", testFailover, false},
		{"no key in logs or Events", testNoLeaks, false},
		{"panel with single sign-on", testPanelSSO, false},
		{"helm uninstall", testUninstall, false},
		{"kustomize install", testKustomize, false},
		{"plugin by name with krew", testKrewInstall, true},
		{"upgrade from the previous release under load", testUpgradeFromPrevious, false},
		{"no key in logs or Events after the upgrade", testNoLeaks, false},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) && !step.apart {
			t.Fatalf("%q failed; the later steps need it", step.name)
		}
	}
}
