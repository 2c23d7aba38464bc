package reveal

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// Options configure the endpoint.
type Options struct {
	// BindAddress is where it listens (host:port).
	BindAddress string
	// Bundle is the ConfigMap of the CA bundle its certificates are published in.
	Bundle client.ObjectKey
	// Names are the DNS names (or IP addresses) its certificates are for: the Service's.
	Names []string
	// Logger logs each reveal by hint, never by key.
	Logger logr.Logger
	// Clock tells the time for certificates (default the real clock).
	Clock clock.PassiveClock
}

// Server is the endpoint, as a controller-runtime Runnable that runs on every replica.
type Server struct {
	opts    Options
	c       client.Client
	handler http.Handler
	cert    atomic.Pointer[tls.Certificate]
	// ready is closed once the first certificate is published and the listener is open.
	ready chan struct{}
	addr  atomic.Pointer[string]
}

// NewServer returns the endpoint acting with cfg (the operator's identity): it authenticates
// and authorizes its callers, reviews the people they name, and reads and deletes reveal
// Secrets, all with cfg.
func NewServer(cfg *rest.Config, opts Options) (*Server, error) {
	if opts.BindAddress == "" || opts.Bundle.Name == "" || opts.Bundle.Namespace == "" || len(opts.Names) == 0 {
		return nil, errors.New("reveal endpoint: a bind address, a CA bundle ConfigMap and the names of its certificate are needed")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("reveal endpoint: %w", err)
	}
	h, err := filter(opts.Logger, &handler{c: c, sar: cs.AuthorizationV1().SubjectAccessReviews(), log: opts.Logger})
	if err != nil {
		return nil, err
	}
	return &Server{opts: opts, c: c, handler: h, ready: make(chan struct{})}, nil
}

// NeedLeaderElection is false: every replica serves reveals.
func (*Server) NeedLeaderElection() bool { return false }

// Ready is closed once the endpoint serves with a published certificate.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is where the endpoint listens, once Ready.
func (s *Server) Addr() string {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// logWriter turns net/http's error log into debug lines.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}

// renew signs a new certificate and publishes it before serving with it.
func (s *Server) renew(ctx context.Context) error {
	now := s.opts.Clock.Now()
	pair, cert, err := selfSigned(s.opts.Names, now)
	if err != nil {
		return err
	}
	if err := publish(ctx, s.c, s.opts.Bundle, cert, now); err != nil {
		return err
	}
	s.cert.Store(&pair)
	return nil
}

// Start serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	if err := s.renew(ctx); err != nil {
		return err
	}
	l, err := net.Listen("tcp", s.opts.BindAddress)
	if err != nil {
		return fmt.Errorf("reveal endpoint: %w", err)
	}
	addr := l.Addr().String()
	s.addr.Store(&addr)
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		// Failed handshakes (a caller that trusts another bundle) are the callers' to report.
		ErrorLog: stdlog.New(logWriter{s.opts.Logger.V(1)}, "", 0),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS13,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil },
		},
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(l, "", "") }()
	close(s.ready)
	s.opts.Logger.Info("serving one-time reveals", "address", addr, "bundle", s.opts.Bundle.String())
	renewal := time.NewTimer(CertRenewal)
	defer renewal.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-renewal.C:
			next := CertRenewal
			if err := s.renew(ctx); err != nil {
				// The certificate in use stays valid for CertLifetime-CertRenewal more.
				s.opts.Logger.Error(err, "renewing the reveal endpoint's certificate; trying again in an hour")
				next = time.Hour
			}
			renewal.Reset(next)
		case <-ctx.Done():
			shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return srv.Shutdown(shutdown)
		}
	}
}
