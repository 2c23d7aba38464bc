package ratelimit

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/metrics"
)

// The rate limits' metrics. None has a per-key label: a tenant's number of keys must not be the
// number of series.
var (
	rateLimited   = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_api_rate_limited_total", Help: "Requests refused with 429 API_KEY_RATE_LIMITED by their key's rate limit, by the store that decided."}, []string{"store"})
	storeFailures = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_api_rate_limit_store_errors_total", Help: "Decisions Redis failed to make, by reason (timeout or error); each request was decided in memory instead."}, []string{"store", "reason"})
	fallbacks     = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_api_rate_limit_fallbacks_total", Help: "Requests of rate-limited keys decided in memory (per-replica limits) because Redis was failing."})

	// The label values are resolved once, so that counting costs no lookup on the request path.
	limitedMemory = rateLimited.WithLabelValues(StoreMemory)
	limitedRedis  = rateLimited.WithLabelValues(StoreRedis)
	storeTimeouts = storeFailures.WithLabelValues(StoreRedis, "timeout")
	storeErrors   = storeFailures.WithLabelValues(StoreRedis, "error")
)

// The credits' metrics while Redis fails (Options.CreditsOnRedisFailure): one counter for each
// outcome, so that an outage's cost, refused requests or credits counted per replica, is seen.
var (
	creditsRefused  = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_api_credits_unavailable_total", Help: "Requests of keys with credits refused with 503 NOT_READY because Redis, which keeps the credits, was failing (creditsOnRedisFailure Refuse)."})
	creditFallbacks = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_api_credits_fallbacks_total", Help: "Requests of keys with credits decided in this replica's memory because Redis was failing (creditsOnRedisFailure CountInMemory)."})
)
