package frontdoor

import (
	"github.com/prometheus/client_golang/prometheus/promauto"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// registered makes the doors' metrics registered as they are made with controller-runtime's
// registry, which every component's metrics endpoint serves: each process that serves through a
// door counts what its limits refuse (switchboard dev runs several components in one process, so
// the door cannot be left to each component to register).
var registered = promauto.With(ctrlmetrics.Registry)
