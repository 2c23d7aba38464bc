package server

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
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
)

// Routes, the label values of the route dimension (bounded: never the raw path).
const (
	routeConnections = "/v1/connections"
	routeV1Other     = "/v1/*"
	routeOpenAPI     = "/openapi.yaml"
	routeOther       = "other"
)

func init() {
	ctrlmetrics.Registry.MustRegister(requestsTotal, authTotal, requestDuration, duplicateHashes, lastUsedWrites)
}
