// Package metricsauth serves a component's Prometheus metrics only to whom Kubernetes RBAC
// allows, as kubebuilder's operators do: over HTTPS, each scrape's bearer token checked with a
// TokenReview and its right to get the /metrics path with a SubjectAccessReview
// (controller-runtime's metrics filter). Metrics name routes, rates and failure counts per
// component; on a port any pod reaches, they are a map for whoever probes the cluster.
//
// It serves them itself, through the front door's metrics door, in place of controller-runtime's
// metrics server: that one offers socket options only, serves 1 MiB of headers and bounds no
// connection count. What it served is kept: controller-runtime's registry, its HTTPS with a
// certificate from a directory or else self-signed, its filter.
package metricsauth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
)

// Path is where the metrics are served.
const Path = "/metrics"

// Options configure the metrics endpoint.
type Options struct {
	// Secure serves HTTPS to authenticated callers RBAC allows to get the path they ask for;
	// without it, plain HTTP to anyone who reaches the port, for local runs (switchboard dev)
	// and tests.
	Secure bool
	// CertDir holds the serving certificate as tls.crt and tls.key, reloaded when they change
	// (default: controller-runtime's, <temp-dir>/k8s-metrics-server/serving-certs). Without
	// them the certificate is self-signed, made at start: scrapers skip verifying it, as they
	// do kube-controller-manager's.
	CertDir string
	// ExtraHandlers are served beside Path by path, behind the same filter (pprof).
	ExtraHandlers map[string]http.Handler
	// Limits are the door's (default frontdoor.MetricsLimits).
	Limits *frontdoor.HTTPLimits
	// Logger logs the filter's refusals, the certificate watcher's errors and, at V(1),
	// failed handshakes.
	Logger logr.Logger
}

// Listener is the metrics (controller-runtime's registry, which every component registers
// with) and opts.ExtraHandlers served at addr ("": not served) as opts say, through the
// metrics door; ctx bounds the watching of a certificate read from opts.CertDir. cfg is what
// the filter reviews tokens with.
func Listener(ctx context.Context, cfg *rest.Config, addr string, opts Options) (frontdoor.Listener, error) {
	l := frontdoor.Listener{Door: "metrics", Address: addr}
	if addr == "" {
		return l, nil
	}
	handlers := map[string]http.Handler{Path: promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})}
	for path, h := range opts.ExtraHandlers {
		if path == Path {
			return l, fmt.Errorf("the metrics endpoint serves %s itself", Path)
		}
		handlers[path] = h
	}
	limits := frontdoor.MetricsLimits
	if opts.Limits != nil {
		limits = *opts.Limits
	}
	limits.ErrorLog = opts.Logger.V(1)
	mux := http.NewServeMux()
	if !opts.Secure {
		for path, h := range handlers {
			mux.Handle(path, h)
		}
		l.Limits, l.Handler = &limits, mux
		return l, nil
	}
	if cfg == nil {
		return l, errors.New("secure metrics need a Kubernetes client configuration to review tokens with")
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return l, err
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, httpClient)
	if err != nil {
		return l, fmt.Errorf("the metrics filter: %w", err)
	}
	for path, h := range handlers {
		filtered, err := filter(opts.Logger.WithValues("path", path), h)
		if err != nil {
			return l, fmt.Errorf("the metrics filter of %s: %w", path, err)
		}
		mux.Handle(path, filtered)
	}
	tlsConfig, err := serving(ctx, opts.CertDir, opts.Logger)
	if err != nil {
		return l, err
	}
	l.Limits, l.TLS, l.Handler = &limits, tlsConfig, mux
	return l, nil
}

// serving is the TLS configuration of the metrics, as controller-runtime's metrics server
// makes it: with the certificate of certDir when it holds tls.crt and tls.key, watched until
// ctx is done; else self-signed.
func serving(ctx context.Context, certDir string, log logr.Logger) (*tls.Config, error) {
	if certDir == "" {
		certDir = filepath.Join(os.TempDir(), "k8s-metrics-server", "serving-certs")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	certPath, keyPath := filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key")
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	if certErr == nil && keyErr == nil {
		w, err := certwatcher.New(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("the metrics certificate: %w", err)
		}
		go func() {
			if err := w.Start(ctx); err != nil {
				log.Error(err, "watching the metrics certificate")
			}
		}()
		cfg.GetCertificate = w.GetCertificate
		return cfg, nil
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{{127, 0, 0, 1}}, nil, "")
	if err != nil {
		return nil, fmt.Errorf("making the metrics' self-signed certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("making the metrics' self-signed certificate: %w", err)
	}
	cfg.Certificates = []tls.Certificate{cert}
	return cfg, nil
}
