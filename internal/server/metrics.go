package server

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/switchboard-dev/switchboard/internal/server/authz"
	"github.com/switchboard-dev/switchboard/internal/server/indexfeed"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/lastused"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
	"github.com/switchboard-dev/switchboard/internal/server/v1api"
)

// Every metric of the server is registered here, once, with controller-runtime's registry, so
// the metrics endpoint exposes them next to the cache's and the Go runtime's. Each part defines
// its own; the front door registers its own, being every process's.
func init() {
	for _, collectors := range [][]prometheus.Collector{
		v1api.Collectors(), authz.Collectors(), keycheck.Collectors(), indexfeed.Collectors(), lastused.Collectors(), leakreceiver.Collectors(),
	} {
		ctrlmetrics.Registry.MustRegister(collectors...)
	}
}
