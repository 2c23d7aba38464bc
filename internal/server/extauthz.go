package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/server/authz"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
)

// The gRPC endpoint of Envoy's external authorization (authz.grpc.listen): internal/server/authz's
// Authorization service, with gRPC health beside it, behind frontdoor's gRPC door and, when
// asked, over TLS.

// extAuthz is the gRPC listener of Check and health (authz.grpc.listen). Health says
// NOT_SERVING until the index has synced (setServing), as /readyz does, and again as the
// listener drains.
func (h *host) extAuthz(ctx context.Context, checker *keycheck.Checker) (l frontdoor.Listener, setServing func(), err error) {
	g, log := &h.c.Authz.GRPC, h.log.WithName("ext-authz")
	l = frontdoor.Listener{Door: "ext-authz", Address: g.Listen, Given: h.deps.AuthzGRPCListener}
	if !l.Served() {
		return l, func() {}, nil
	}
	limits := frontdoor.DefaultGRPCLimits.Behind(h.gateways)
	limits.MaxMessage = int(*g.MaxMessageBytes)
	if len(h.gateways) == 0 && g.ClientCAFile == "" {
		limits.GatewayStreams = 0 // no caller is a gateway: everyone shares every call
	}
	door := frontdoor.NewGRPC(limits, authv3.Authorization_Check_FullMethodName, healthpb.Health_Check_FullMethodName)
	var serverOpts []grpc.ServerOption
	if g.TLSCertFile != "" {
		creds, err := authzTLS(ctx, g, log)
		if err != nil {
			return l, nil, err
		}
		serverOpts = append(serverOpts, grpc.Creds(creds))
	}
	srv := door.NewServer(serverOpts...)
	authv3.RegisterAuthorizationServer(srv, authz.NewExtAuthz(checker, authz.ExtAuthzOptions{StripAuthorization: g.StripAuthorization, Logger: log}))
	hs := health.NewServer()
	for _, service := range []string{"", authv3.Authorization_ServiceDesc.ServiceName} {
		hs.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	healthpb.RegisterHealthServer(srv, hs)
	setServing = func() {
		for _, service := range []string{"", authv3.Authorization_ServiceDesc.ServiceName} {
			hs.SetServingStatus(service, healthpb.HealthCheckResponse_SERVING)
		}
	}
	l.GRPC, l.Server, l.BeforeStop = door, srv, hs.Shutdown
	return l, setServing, nil
}

// authzTLS is the gRPC listener's TLS: its certificate reloaded by controller-runtime's
// certwatcher, and, with a client CA, gateways must present a certificate it signed.
func authzTLS(ctx context.Context, g *configv1alpha1.AuthzGRPC, log logr.Logger) (credentials.TransportCredentials, error) {
	w, err := certwatcher.New(g.TLSCertFile, g.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("authz.grpc.tlsCertFile: %w", err)
	}
	go func() {
		if err := w.Start(ctx); err != nil {
			log.Error(err, "watching the ext_authz certificate failed; the one loaded stays in use")
		}
	}()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: w.GetCertificate, NextProtos: []string{"h2"}}
	if g.ClientCAFile != "" {
		pem, err := os.ReadFile(g.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("authz.grpc.clientCAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("authz.grpc.clientCAFile: no PEM certificate in it")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}
