package frontdoor

import (
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestMetricsRegistered: whichever component imports the door, its metrics endpoint (which
// serves controller-runtime's registry) has the door's counters.
func TestMetricsRegistered(t *testing.T) {
	timedOutIn[phaseIdle].Add(0) // a vector's series exists once a label value is used
	grpcRefused.WithLabelValues("streams").Add(0)
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	for _, name := range []string{"switchboard_frontdoor_grpc_refused_total", "switchboard_frontdoor_client_connections_refused_total",
		"switchboard_frontdoor_http_connections_evicted_total", "switchboard_frontdoor_http_bodies_refused_total",
		"switchboard_frontdoor_http_connections_timed_out_total"} {
		if !have[name] {
			t.Errorf("%s is not in controller-runtime's registry", name)
		}
	}
}
