package leakreceiver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/metrics"
)

// The metrics' source label: which of GitHub's ways a request or a report came by.
const (
	sourcePartner = "partner"
	sourceAlert   = "alert"
	// sourceCatchUp is the listing of an organization's open alerts (catchup.go).
	sourceCatchUp = "catch_up"
)

var (
	requests        = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_leak_report_requests_total", Help: "Requests to the leak reports listener, by source (partner, alert) and outcome (accepted, replayed, ignored, client_limited, rate_limited, unauthenticated, malformed, too_large, bad_gateway, unavailable, failed)."}, []string{"source", "outcome"})
	reportsSeen     = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_leak_reports_total", Help: "Leaked tokens in verified reports and listed alerts, by source (partner, alert, catch_up) and outcome (recorded, already_recorded, not_issued, false_positive)."}, []string{"source", "outcome"})
	catchUpRuns     = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_leak_catch_up_runs_total", Help: "Listings of the organization's open secret scanning alerts, by outcome (complete, budget_spent: pages left unread, failed)."}, []string{"outcome"})
	catchUpRequests = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_leak_catch_up_github_requests_total", Help: "Requests to GitHub's REST API made to list the organization's open secret scanning alerts."})
)
