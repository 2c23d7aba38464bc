package v1api

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/boundmetric"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
)

// The API port's metrics, on controller-runtime's registry, so the manager's metrics server
// exposes them next to the cache's and the Go runtime's.
var (
	requestsTotal      = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_api_requests_total", Help: "Requests to the API server by route and HTTP status."}, []string{"route", "status"})
	authTotal          = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_api_auth_total", Help: "Authentication outcomes of /v1 requests: ok, an error code, and why a key was invalid."}, []string{"code", "reason"})
	requestDuration    = metrics.Registered.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_api_request_duration_seconds", Help: "Time to answer a request, by route.", Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1}}, []string{"route"})
	concurrencyRefused = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_api_concurrency_refused_total", Help: "List requests refused with 429 TOO_MANY_CONCURRENT_REQUESTS because their namespace's responses in flight on this replica were at --max-in-flight-bytes-per-namespace."})

	// sourceRefused counts the valid keys refused for their source.
	sourceRefused = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_api_source_refused_total", Help: "Requests with a valid key refused with 403 SOURCE_NOT_ALLOWED because the client was outside the key's allowed source ranges."})

	// audienceRefused counts the valid keys refused on /v1 for their audiences.
	audienceRefused = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_api_audience_refused_total", Help: "Requests to /v1 with a valid key refused with 403 AUDIENCE_NOT_ALLOWED because the key's audiences do not include the server's --audience."})
)

// countAuth counts /v1's decision as the API's authentication metrics always have.
func countAuth(v *keycheck.Verdict) {
	switch {
	case v.Code == apicode.NotReady:
		authNotReady.Inc()
		return
	case v.Key() == nil && v.Code == apicode.RateLimited:
		authRateLimited.Inc()
		return
	case v.Key() == nil:
		reason := ""
		if v.Code == apicode.APIKeyInvalid {
			reason = v.Reason()
		}
		authTotal.WithLabelValues(v.Code, reason).Inc()
		return
	}
	authOK.Inc()
	switch v.Code {
	case apicode.SourceNotAllowed:
		sourceRefused.Inc()
	case apicode.AudienceNotAllowed:
		audienceRefused.Inc()
	}
}

// answeredStatuses are the statuses the API answers, whose series are pre-bound per route.
var answeredStatuses = [...]int{
	http.StatusOK, http.StatusNotModified, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
	http.StatusMethodNotAllowed, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable,
}

var (
	requestSeries  [numRoutes][len(answeredStatuses)]boundmetric.Counter
	durationSeries [numRoutes]boundmetric.Observer

	// The authentication outcomes that carry no reason.
	authOK          = &boundmetric.Counter{Vec: authTotal, Labels: []string{"ok", ""}}
	authNotReady    = &boundmetric.Counter{Vec: authTotal, Labels: []string{apicode.NotReady, ""}}
	authRateLimited = &boundmetric.Counter{Vec: authTotal, Labels: []string{apicode.RateLimited, ""}}
)

// countRequest counts one answered request of route with status, and its duration.
func countRequest(rt route, status int, seconds float64) {
	durationSeries[rt].Observe(seconds)
	for i, s := range answeredStatuses {
		if s == status {
			requestSeries[rt][i].Inc()
			return
		}
	}
	requestsTotal.WithLabelValues(routes[rt].label, strconv.Itoa(status)).Inc()
}

func init() {
	for rt := range numRoutes {
		durationSeries[rt].Vec, durationSeries[rt].Label = requestDuration, routes[rt].label
		for i, s := range answeredStatuses {
			requestSeries[rt][i].Vec = requestsTotal
			requestSeries[rt][i].Labels = []string{routes[rt].label, strconv.Itoa(s)}
		}
	}
}
