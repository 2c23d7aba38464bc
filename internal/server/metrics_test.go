//go:build !unit

package server

import (
	"net/http"
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

// TestMetrics: requests by route and status, auth outcomes by code and the latency histogram
// are counted, in controller-runtime's registry.
func TestMetrics(t *testing.T) {
	ns := env.Namespace(t, "metrics")
	k := newKey(t, ns, "counted", switchboardv1alpha1.APIKeySpec{})
	s := startServer(t, nil, noFailureLimit(nil), Deps{}, true)
	ok := func() float64 {
		return metricValue(t, "switchboard_api_requests_total", "route", "/v1/connections", "status", "200")
	}
	invalid := func() float64 {
		return metricValue(t, "switchboard_api_auth_total", "code", apicode.APIKeyInvalid, "reason", keyindex.Unknown.String())
	}
	notFound := func() float64 {
		return metricValue(t, "switchboard_api_requests_total", "route", "/v1/*", "status", "404")
	}
	okBefore, invalidBefore, notFoundBefore := ok(), invalid(), notFound()
	for range 3 {
		s.get(t, "/v1/connections", k.Key)
	}
	s.get(t, "/v1/connections", "sb_live_nope")
	if resp := s.get(t, "/v1/anything/else", k.Key); resp.Status != http.StatusNotFound {
		t.Fatalf("status %d", resp.Status)
	}
	if got := ok() - okBefore; got != 3 {
		t.Errorf("200s on /v1/connections counted %v, want 3", got)
	}
	if got := invalid() - invalidBefore; got != 1 {
		t.Errorf("API_KEY_INVALID outcomes counted %v, want 1", got)
	}
	if got := notFound() - notFoundBefore; got != 1 {
		t.Errorf("404s on /v1/* counted %v, want 1 (the raw path must not be a label)", got)
	}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		if f.GetName() == "switchboard_api_request_duration_seconds" {
			for _, m := range f.GetMetric() {
				found = found || m.GetHistogram().GetSampleCount() > 0
			}
		}
	}
	if !found {
		t.Error("the latency histogram is not in controller-runtime's registry, or is empty")
	}
}

// metricValue is the value of the counter or gauge name in controller-runtime's registry
// whose labels include labelValues (name, value, …; a label the series lacks counts as "", so
// none picks the first series): what its metrics server would export. A series never counted
// is 0.
func metricValue(t testing.TB, name string, labelValues ...string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			match := true
			for i := 0; i+1 < len(labelValues); i += 2 {
				match = match && have[labelValues[i]] == labelValues[i+1]
			}
			if match {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}
