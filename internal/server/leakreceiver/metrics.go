package leakreceiver

import (
	"github.com/prometheus/client_golang/prometheus"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// The metrics' source label: which of GitHub's ways a request came by.
const (
	sourcePartner = "partner"
	sourceAlert   = "alert"
	sourceOther   = "other"
)

var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_leak_report_requests_total",
		Help: "Requests to the leak reports listener, by source (partner, alert, other) and outcome (accepted, ignored, rate_limited, unauthenticated, malformed, too_large, unavailable, failed).",
	}, []string{"source", "outcome"})
	reportsSeen = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_leak_reports_total",
		Help: "Leaked tokens in verified reports, by source (partner, alert) and outcome (recorded, already_recorded, not_issued, false_positive).",
	}, []string{"source", "outcome"})
)

// Collectors are the package's metrics, for the server to register with its own.
func Collectors() []prometheus.Collector { return []prometheus.Collector{requests, reportsSeen} }

// source is the metrics' source of a request's path.
func source(path string) string {
	switch path {
	case PartnerPath:
		return sourcePartner
	case AlertsPath:
		return sourceAlert
	}
	return sourceOther
}

// metricSource is the metrics' source of a LeakReport's.
func metricSource(src string) string {
	if src == switchboardv1alpha1.LeakSourceGitHubAlert {
		return sourceAlert
	}
	return sourcePartner
}
