// Package metrics makes the product's metrics, each registered as it is made with
// controller-runtime's registry: the one every component's metrics endpoint serves. A package
// registers its own when it is linked, so whichever components a process runs (switchboard dev
// runs several in one) it serves the metrics of every part it runs, each once.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus/promauto"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Registered makes a metric registered with controller-runtime's registry.
var Registered = promauto.With(ctrlmetrics.Registry)
