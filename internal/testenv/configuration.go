package testenv

import (
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// OperatorConfiguration is the configuration of an operator (or webhook sender) a test runs in
// its own process, in the system namespace system: one replica, so no Lease, and no metrics or
// probes, whose ports every test would take. The rest is left to the defaults, which Run fills
// in; a test sets what it needs.
func OperatorConfiguration(system string) *configv1alpha1.OperatorConfiguration {
	return &configv1alpha1.OperatorConfiguration{
		SystemNamespace: system, LeaderElect: ptr.To(false), Metrics: configv1alpha1.Metrics{MetricsBindAddress: ptr.To("")},
		HealthProbeBindAddress: ptr.To(""),
	}
}
