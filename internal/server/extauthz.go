package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/go-logr/logr"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/ratelimit"
)

// Envoy's external authorization over gRPC (envoy.service.auth.v3.Authorization/Check): the
// decision of check.go for Envoy, Envoy Gateway, Istio and kgateway, on a listener of its own
// (--authz-grpc-listen) with gRPC health beside it.
//
// The route's audience is the context extension AudienceExtension, which the gateway's route
// configuration sets (Envoy's per-route check_settings, Envoy Gateway's and kgateway's
// contextExtensions); a route without it names no audience, which only keys without audiences
// may use. The client's address is the one Envoy saw (attributes.source.address), or, when
// that is a --trusted-proxies address, the X-Forwarded-For walk /v1 does.
//
// Envoy answers every denial 403 unless told otherwise, so each denial sets its status: 401,
// 403, 429 as on /v1, and 503 while the index has not synced — as a denial, not an RPC error,
// so a gateway configured to fail open still fails closed. An allowed request goes upstream
// with the key's identity (HeaderKey, HeaderKeyUID, HeaderKeyHint, replacing any a client
// sent) and the same facts in dynamic metadata (namespace "switchboard.dev") for later filters
// and access logs.

// AudienceExtension is the context extension that names a route's audience.
const AudienceExtension = "switchboard.dev/audience"

// MetadataNamespace is the dynamic metadata namespace of an allowed check's facts.
const MetadataNamespace = "switchboard.dev"

// extAuthz serves Authorization/Check.
type extAuthz struct {
	authv3.UnimplementedAuthorizationServer
	api *api
	// stripAuthorization removes Authorization before the request goes upstream.
	stripAuthorization bool
	log                logr.Logger
}

// Check decides one request Envoy is about to route.
func (s *extAuthz) Check(ctx context.Context, in *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	start := time.Now()
	attrs := in.GetAttributes()
	h := attrs.GetRequest().GetHttp()
	req := checkRequest{
		authorization: headerValues(h, "authorization"),
		audience:      attrs.GetContextExtensions()[AudienceExtension],
	}
	if peer := socketAddress(attrs.GetSource()); peer.IsValid() {
		req.addr, req.addrKnown = clientaddr.From(peer, headerValues(h, "x-forwarded-for"), s.api.trusted), true
	}
	v := s.api.check(ctx, &req, s.api.now(start))
	resp := s.response(&v)
	countCheck(protocolGRPC, &v, time.Since(start))
	if log := s.log.V(1); log.Enabled() {
		hint := ""
		if v.auth.wellFormed != "" {
			hint = apikey.Hint(v.auth.wellFormed)
		}
		log.Info("check", "audience", req.audience, "status", v.status, "code", v.code, "key", hint, "client", req.addr.String())
	}
	return resp, nil
}

// response is v as Envoy's CheckResponse.
func (s *extAuthz) response(v *verdict) *authv3.CheckResponse {
	var rateLimit []*corev3.HeaderValueOption
	if v.policy != nil {
		policy, current := ratelimit.Fields(v.policy, v.result)
		rateLimit = []*corev3.HeaderValueOption{setHeader(ratelimit.FieldPolicy, policy), setHeader(ratelimit.FieldRateLimit, current)}
	}
	if v.allowed() {
		key := v.auth.key
		id, uid, hint := key.Namespace+"/"+key.Name, string(key.UID), apikey.Hint(v.auth.wellFormed)
		ok := &authv3.OkHttpResponse{
			Headers:              []*corev3.HeaderValueOption{setHeader(HeaderKey, id), setHeader(HeaderKeyUID, uid), setHeader(HeaderKeyHint, hint)},
			ResponseHeadersToAdd: rateLimit,
		}
		if s.stripAuthorization {
			ok.HeadersToRemove = []string{"authorization"}
		}
		return &authv3.CheckResponse{
			Status:       &rpcstatus.Status{Code: int32(codes.OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok},
			DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
				MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
					"namespace": structpb.NewStringValue(key.Namespace),
					"name":      structpb.NewStringValue(key.Name),
					"uid":       structpb.NewStringValue(uid),
					"hint":      structpb.NewStringValue(hint),
				}}),
			}},
		}
	}
	headers := make([]*corev3.HeaderValueOption, 0, len(rateLimit)+5)
	headers = append(headers, rateLimit...)
	headers = append(headers,
		setHeader("Content-Type", "application/json"),
		setHeader("Cache-Control", "no-store"),
		setHeader(HeaderCode, v.code))
	if v.retryAfter > 0 {
		headers = append(headers, setHeader("Retry-After", retryAfter(v.retryAfter)))
	}
	if v.challenge != "" {
		headers = append(headers, setHeader("WWW-Authenticate", v.challenge))
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(grpcCode(v.status)), Message: v.code}, //nolint:gosec // gRPC codes are below 17
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(v.status)}, //nolint:gosec // an HTTP status, below 600
			Headers: headers,
			Body:    string(errorJSON(v.code, v.message)),
		}},
	}
}

// grpcCode is the gRPC status of a denial: Envoy only tells OK from the rest, but logs and
// other ext_authz clients read it.
func grpcCode(status int) codes.Code {
	switch status {
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	return codes.PermissionDenied
}

func setHeader(name, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: name, Value: value},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// headerValues are the values of the lower-case header name in an ext_authz request: from the
// headers map (where Envoy joins repeated fields with ","), or from header_map when the gateway
// sends raw headers (encode_raw_headers), where each field is its own entry.
func headerValues(h *authv3.AttributeContext_HttpRequest, name string) []string {
	if v, ok := h.GetHeaders()[name]; ok {
		return []string{v}
	}
	var values []string
	for _, hv := range h.GetHeaderMap().GetHeaders() {
		if strings.EqualFold(hv.GetKey(), name) {
			if raw := hv.GetRawValue(); raw != nil {
				values = append(values, string(raw))
			} else {
				values = append(values, hv.GetValue())
			}
		}
	}
	return values
}

// socketAddress is the address of an ext_authz peer; the zero Addr when it has none.
func socketAddress(p *authv3.AttributeContext_Peer) netip.Addr {
	return clientaddr.Parse(p.GetAddress().GetSocketAddress().GetAddress())
}

// newExtAuthz is the gRPC endpoint of Check and health on l. Health says NOT_SERVING until the
// index has synced (setServing), as /readyz does, and again as the endpoint drains.
func newExtAuthz(ctx context.Context, l net.Listener, a *api, opts *Options, log logr.Logger) (frontdoor.Endpoint, func(), error) {
	limits := frontdoor.DefaultGRPCLimits
	limits.MaxMessage = opts.AuthzGRPCMaxMessageBytes
	door := frontdoor.NewGRPC(limits, authv3.Authorization_Check_FullMethodName, healthpb.Health_Check_FullMethodName)
	var serverOpts []grpc.ServerOption
	if opts.AuthzGRPCTLSCertFile != "" {
		creds, err := authzTLS(ctx, opts, log)
		if err != nil {
			return frontdoor.Endpoint{}, nil, err
		}
		serverOpts = append(serverOpts, grpc.Creds(creds))
	}
	srv := door.NewServer(serverOpts...)
	authv3.RegisterAuthorizationServer(srv, &extAuthz{api: a, stripAuthorization: opts.AuthzStripAuthorization, log: log})
	hs := health.NewServer()
	for _, service := range []string{"", authv3.Authorization_ServiceDesc.ServiceName} {
		hs.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	healthpb.RegisterHealthServer(srv, hs)
	setServing := func() {
		for _, service := range []string{"", authv3.Authorization_ServiceDesc.ServiceName} {
			hs.SetServingStatus(service, healthpb.HealthCheckResponse_SERVING)
		}
	}
	return door.Endpoint(l, srv, hs.Shutdown), setServing, nil
}

// authzTLS is the gRPC listener's TLS: its certificate reloaded by controller-runtime's
// certwatcher, and, with a client CA, gateways must present a certificate it signed.
func authzTLS(ctx context.Context, opts *Options, log logr.Logger) (credentials.TransportCredentials, error) {
	w, err := certwatcher.New(opts.AuthzGRPCTLSCertFile, opts.AuthzGRPCTLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--authz-grpc-tls-cert-file: %w", err)
	}
	go func() {
		if err := w.Start(ctx); err != nil {
			log.Error(err, "watching the ext_authz certificate failed; the one loaded stays in use")
		}
	}()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: w.GetCertificate, NextProtos: []string{"h2"}}
	if opts.AuthzGRPCClientCAFile != "" {
		pem, err := os.ReadFile(opts.AuthzGRPCClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--authz-grpc-client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("--authz-grpc-client-ca-file: no PEM certificate in it")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}
