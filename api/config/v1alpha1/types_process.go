package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Metrics is the Prometheus metrics endpoint of the server's and the operator's processes,
// inline in their configurations.
type Metrics struct {
	// metricsBindAddress is the address of the Prometheus metrics (default: the server's ":8081",
	// the operator's ":8080"); "" serves none.
	MetricsBindAddress *string `json:"metricsBindAddress,omitempty"`
	// metricsSecure serves the metrics over HTTPS to callers whose token RBAC allows to get
	// /metrics (default true); false serves plain HTTP to anyone.
	MetricsSecure *bool `json:"metricsSecure,omitempty"`
}

// Shutdown is how the server's and the panel's listeners stop, inline in their configurations:
// readiness fails first, so that load balancers stop sending, then open requests drain.
type Shutdown struct {
	// shutdownDelay is how long readiness fails before the listener closes (default 5s); 0: none.
	ShutdownDelay *metav1.Duration `json:"shutdownDelay,omitempty"`
	// shutdownTimeout is how long open requests may drain (default 30s); more than 0.
	ShutdownTimeout *metav1.Duration `json:"shutdownTimeout,omitempty"`
}
