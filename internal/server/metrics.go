package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/ratelimit"
)

// Metrics are registered with controller-runtime's registry, so the manager's metrics server
// exposes them next to the cache's and the Go runtime's.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_api_requests_total",
		Help: "Requests to the API server by route and HTTP status.",
	}, []string{"route", "status"})

	authTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_api_auth_total",
		Help: "Authentication outcomes of /v1 requests: ok, an error code, and why a key was invalid.",
	}, []string{"code", "reason"})

	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "switchboard_api_request_duration_seconds",
		Help:    "Time to answer a request, by route.",
		Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1},
	}, []string{"route"})

	duplicateHashes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "switchboard_api_duplicate_key_hashes",
		Help: "Key hashes held by more than one hash Secret; each authenticates nobody. Anything but 0 needs a look.",
	})

	lastUsedWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_api_last_used_writes_total",
		Help: "Writes of APIKey status.lastUsedAt by result.",
	}, []string{"result"})

	concurrencyRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_api_concurrency_refused_total",
		Help: "List requests refused with 429 TOO_MANY_CONCURRENT_REQUESTS because their namespace's responses in flight on this replica were at --max-in-flight-bytes-per-namespace.",
	})
)

// The writer's own metrics: how far it is behind, so that a budget too small for the number of
// keys in use shows on a dashboard instead of as silently stale lastUsedAt.
var (
	lastUsedBacklog = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "switchboard_api_last_used_backlog",
		Help: "APIKeys whose status.lastUsedAt is due for a write that the last flush left for later (over the write budget).",
	})
	lastUsedStaleness = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "switchboard_api_last_used_staleness_seconds",
		Help: "Age of the oldest status.lastUsedAt among the keys due for a write at the last flush: the effective write interval.",
	})
)

// sourceRefused counts the valid keys refused for their source.
var sourceRefused = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "switchboard_api_source_refused_total",
	Help: "Requests with a valid key refused with 403 SOURCE_NOT_ALLOWED because the client was outside the key's allowed source ranges.",
})

// audienceRefused counts the valid keys refused on /v1 for their audiences.
var audienceRefused = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "switchboard_api_audience_refused_total",
	Help: "Requests to /v1 with a valid key refused with 403 AUDIENCE_NOT_ALLOWED because the key's audiences do not include the server's --audience.",
})

// The authorization endpoints' metrics: Envoy's ext_authz (gRPC) and forward-auth (HTTP).
// Never a per-key label: a series per key would let tenants grow the scrape without bound.
var (
	authzChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_authz_checks_total",
		Help: "Decisions of the authorization endpoints by protocol (grpc: Envoy ext_authz, http: forward-auth), result (allowed, denied) and error code.",
	}, []string{"protocol", "result", "code"})
	authzDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "switchboard_authz_check_duration_seconds",
		Help:    "Time to decide a check of the authorization endpoints, by protocol.",
		Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25},
	}, []string{"protocol"})
)

// protocol is an authorization endpoint's protocol, an index of its pre-bound series.
type protocol int

const (
	protocolGRPC protocol = iota
	protocolHTTP
	numProtocols
)

var protocolLabels = [numProtocols]string{"grpc", "http"}

// checkCodes are the codes a check can end with ("" is allowed), whose series are pre-bound.
var checkCodes = [...]string{"", CodeAPIKeyMissing, CodeAPIKeyInvalid, CodeRateLimited, CodeKeyRateLimited,
	CodeSourceNotAllowed, CodeAudienceNotAllowed, CodeNotReady}

var (
	checkSeries    [numProtocols][len(checkCodes)]boundCounter
	checkDurations [numProtocols]boundObserver
)

// countCheck counts one decision of an authorization endpoint and its duration.
func countCheck(p protocol, v *verdict, d time.Duration) {
	checkDurations[p].Observe(d.Seconds())
	for i, c := range checkCodes {
		if c == v.code {
			checkSeries[p][i].Inc()
			return
		}
	}
	authzChecks.WithLabelValues(protocolLabels[p], "denied", v.code).Inc()
}

// countAuth counts /v1's decision as the API's authentication metrics always have.
func countAuth(v *verdict) {
	switch {
	case v.code == CodeNotReady:
		authNotReady.Inc()
		return
	case v.auth.key == nil && v.code == CodeRateLimited:
		authRateLimited.Inc()
		return
	case v.auth.key == nil:
		reason := ""
		if v.code == CodeAPIKeyInvalid {
			reason = v.auth.result.String()
		}
		authTotal.WithLabelValues(v.code, reason).Inc()
		return
	}
	authOK.Inc()
	switch v.code {
	case CodeSourceNotAllowed:
		sourceRefused.Inc()
	case CodeAudienceNotAllowed:
		audienceRefused.Inc()
	}
}

// boundCounter is one series of a CounterVec, bound on its first use. WithLabelValues hashes
// and validates its label values and looks the series up under a lock: per request, that cost
// more than all the rest of the instrumentation. Bound lazily, so that only series that
// happen are exported.
type boundCounter struct {
	once   sync.Once
	vec    *prometheus.CounterVec
	labels []string
	c      prometheus.Counter
}

func (b *boundCounter) Inc() {
	b.once.Do(func() { b.c = b.vec.WithLabelValues(b.labels...) })
	b.c.Inc()
}

// boundObserver is one series of a HistogramVec, bound on its first use.
type boundObserver struct {
	once  sync.Once
	vec   *prometheus.HistogramVec
	label string
	o     prometheus.Observer
}

func (b *boundObserver) Observe(v float64) {
	b.once.Do(func() { b.o = b.vec.WithLabelValues(b.label) })
	b.o.Observe(v)
}

// answeredStatuses are the statuses the API answers, whose series are pre-bound per route.
var answeredStatuses = [...]int{
	http.StatusOK, http.StatusNotModified, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
	http.StatusMethodNotAllowed, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable,
}

var (
	requestSeries  [numRoutes][len(answeredStatuses)]boundCounter
	durationSeries [numRoutes]boundObserver

	// The authentication outcomes that carry no reason.
	authOK          = &boundCounter{vec: authTotal, labels: []string{"ok", ""}}
	authNotReady    = &boundCounter{vec: authTotal, labels: []string{CodeNotReady, ""}}
	authRateLimited = &boundCounter{vec: authTotal, labels: []string{CodeRateLimited, ""}}
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
		durationSeries[rt].vec, durationSeries[rt].label = requestDuration, routes[rt].label
		for i, s := range answeredStatuses {
			requestSeries[rt][i].vec = requestsTotal
			requestSeries[rt][i].labels = []string{routes[rt].label, strconv.Itoa(s)}
		}
	}
	for p := range numProtocols {
		checkDurations[p].vec, checkDurations[p].label = authzDuration, protocolLabels[p]
		for i, c := range checkCodes {
			result := "denied"
			if c == "" {
				result = "allowed"
			}
			checkSeries[p][i].vec = authzChecks
			checkSeries[p][i].labels = []string{protocolLabels[p], result, c}
		}
	}
	// Every metric of the server, its rate limiter's included, is registered here, once.
	ctrlmetrics.Registry.MustRegister(requestsTotal, authTotal, requestDuration, duplicateHashes, lastUsedWrites, concurrencyRefused,
		lastUsedBacklog, lastUsedStaleness, sourceRefused, audienceRefused, authzChecks, authzDuration)
	ctrlmetrics.Registry.MustRegister(ratelimit.Collectors()...)
	ctrlmetrics.Registry.MustRegister(frontdoor.Collectors()...)
}
