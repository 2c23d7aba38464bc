package frontdoor

import (
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The doors' metrics are registered once with controller-runtime's registry, which every
// component's metrics endpoint serves: each process that serves through a door counts what its
// limits refuse (switchboard dev runs several components in one process, so the door cannot be
// left to each component to register).
func init() {
	ctrlmetrics.Registry.MustRegister(grpcRefused, connRefused, connTurnedAway, httpEvicted, bodiesRefused, bodiesUnread, timedOut)
}
