package server

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/frontdoor/metricsauth"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/server/indexfeed"
)

// newManager builds the manager of the server's client (the last-use writer's). Every replica
// serves: no leader election. Its own cache stays empty: the index's informers are
// internal/server/indexfeed's. Its probe and metrics listeners are off: Run serves both through the
// front door.
func newManager(cfg *rest.Config, log logr.Logger) (ctrl.Manager, error) {
	return ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.Scheme,
		MapperProvider:         indexfeed.RESTMapper,
		Logger:                 log,
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
}

// metrics is the metrics listener the configuration asks for, with pprof beside it when asked.
// ctx bounds the watching of its certificate.
func (h *host) metrics(ctx context.Context) (frontdoor.Listener, error) {
	metrics := metricsauth.Options{Secure: *h.c.MetricsSecure, Logger: h.log.WithName("metrics")}
	if h.c.Pprof {
		metrics.ExtraHandlers = map[string]http.Handler{
			"/debug/pprof/":        http.HandlerFunc(pprof.Index), // heap, goroutine, allocs… by name
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		}
		// A CPU profile or trace answers after the seconds it asks for (30 by default).
		limits := frontdoor.MetricsLimits
		limits.Active = pprofActive
		metrics.Limits = &limits
	}
	return metricsauth.Listener(ctx, h.deps.RESTConfig, *h.c.MetricsBindAddress, metrics)
}

// pprofActive bounds an answer of the metrics listener with pprof on: room for a profile of a
// few minutes.
const pprofActive = 5 * time.Minute
