package reveal

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// Options configure the endpoint.
type Options struct {
	// BindAddress is where it listens (host:port).
	BindAddress string
	// GetCertificate gives the serving certificate (internal/operator/servingcert's Keeper, which
	// publishes it in the CA bundle ConfigMap callers trust).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Logger logs each reveal by hint, never by key.
	Logger logr.Logger
}

// Server is the endpoint, as a controller-runtime Runnable that runs on every replica.
type Server struct {
	opts    Options
	handler http.Handler
}

// NewServer returns the endpoint acting with cfg (the operator's identity): it authenticates
// and authorizes its callers, reviews the people they name, and reads and deletes reveal
// Secrets, all with cfg.
func NewServer(cfg *rest.Config, opts Options) (*Server, error) {
	if opts.BindAddress == "" || opts.GetCertificate == nil {
		return nil, errors.New("reveal endpoint: a bind address and a serving certificate are needed")
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
	return &Server{opts: opts, handler: h}, nil
}

// NeedLeaderElection is false: every replica serves reveals.
func (*Server) NeedLeaderElection() bool { return false }

// drain bounds how long the endpoint waits for open reveals once told to stop.
const drain = 5 * time.Second

// Start serves until ctx is done, through the front door's reveal door (frontdoor.Doors).
func (s *Server) Start(ctx context.Context) error {
	l, err := frontdoor.Listen(s.opts.BindAddress)
	if err != nil {
		return fmt.Errorf("reveal endpoint: %w", err)
	}
	limits := frontdoor.RevealLimits
	// Failed handshakes (a caller that trusts another bundle) are the callers' to report.
	limits.ErrorLog = s.opts.Logger.V(1)
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: s.opts.GetCertificate}
	return frontdoor.HTTPS(l, limits, cfg, s.handler).Serve(ctx, drain, s.opts.Logger)
}
