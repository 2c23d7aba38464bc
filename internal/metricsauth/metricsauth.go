// Package metricsauth serves a component's Prometheus metrics only to whom Kubernetes RBAC
// allows, as kubebuilder's operators do: over HTTPS, each scrape's bearer token checked with a
// TokenReview and its right to get the /metrics path with a SubjectAccessReview
// (controller-runtime's metrics filter). Metrics name routes, rates and failure counts per
// component; on a port any pod reaches, they are a map for whoever probes the cluster.
package metricsauth

import (
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options returns the manager's metrics server options for bindAddress ("0" disables it):
// with secure, HTTPS (a self-signed certificate unless certDir holds tls.crt and tls.key) and
// the authentication and authorization filter; without, plain HTTP to anyone who reaches the
// port, for local runs (switchboard dev) and tests.
func Options(bindAddress string, secure bool, certDir string, extra map[string]http.Handler) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: bindAddress, ExtraHandlers: extra}
	if secure {
		opts.SecureServing = true
		opts.CertDir = certDir
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}
