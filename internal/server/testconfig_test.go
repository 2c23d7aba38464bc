package server

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// systemNamespace is where the tests' hash Secrets live, as the operator would put them.
const systemNamespace = "switchboard-system"

// sc is a server configuration, of which a test sets what it needs (testConfig fills the rest).
type sc = configv1alpha1.ServerConfiguration

// testConfig is a copy of c (nil: an empty one) with what the tests share where c sets nothing:
// the tests' system namespace, no probes or metrics (each test would take the same ports) and no
// shutdown delay.
func testConfig(c *sc) *sc {
	out := sc{}
	if c != nil {
		out = *c
	}
	if out.SystemNamespace == "" {
		out.SystemNamespace = systemNamespace
	}
	for _, addr := range []**string{&out.HealthProbeBindAddress, &out.MetricsBindAddress} {
		if *addr == nil {
			*addr = ptr.To("")
		}
	}
	if out.ShutdownDelay == nil {
		out.ShutdownDelay = &metav1.Duration{}
	}
	return &out
}

// noFailureLimit is c (nil: an empty configuration) with the failure limiter off, for the
// tests that fail on purpose.
func noFailureLimit(c *sc) *sc {
	if c == nil {
		c = &sc{}
	}
	c.AuthFailureLimit.Rate = ptr.To(0.0)
	return c
}

// failureLimit is the failure limiter at rate and burst.
func failureLimit(rate float64, burst int) configv1alpha1.AuthFailureLimit {
	return configv1alpha1.AuthFailureLimit{Rate: ptr.To(rate), Burst: ptr.To(int32(burst))}
}
