package authz

import (
	"context"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/go-logr/logr"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/server/apierror"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// Envoy's external authorization over gRPC (envoy.service.auth.v3.Authorization/Check): the
// decision for Envoy, Envoy Gateway, Istio and kgateway. The server serves it on a listener of
// its own (--authz-grpc-listen) with gRPC health beside it.
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
// and access logs; a denial by a key's permissions carries the rule that refused (its index and
// text) in both. A key's permissions are matched against the request's method and path
// (attributes.request.http).

// AudienceExtension is the context extension that names a route's audience.
const AudienceExtension = "switchboard.dev/audience"

// MetadataNamespace is the dynamic metadata namespace of a check's facts: an allowed key's, or the
// permissions rule that refused one.
const MetadataNamespace = "switchboard.dev"

// MetadataRateLimit is the field of an allowed check's facts that holds the key's own rate limit
// (for a key with one) in the shape Envoy's rate limit filter reads as an override
// (RateLimit.Override.DynamicMetadata: requests_per_unit and unit), so that one gateway rule
// enforces every key's own limit.
const MetadataRateLimit = "rate_limit"

// envoyUnits are the units of Envoy's rate limits a key's period is written in, largest first.
var envoyUnits = []struct {
	unit typev3.RateLimitUnit
	d    time.Duration
}{{typev3.RateLimitUnit_DAY, 24 * time.Hour}, {typev3.RateLimitUnit_HOUR, time.Hour}, {typev3.RateLimitUnit_MINUTE, time.Minute}, {typev3.RateLimitUnit_SECOND, time.Second}}

// EnvoyRateLimit writes l as Envoy's requests per unit: exactly when its period is one unit
// (100 per minute), else the same rate per the largest unit within the period, rounded down
// (100 per 90 s is 66 per minute), so a gateway never allows more than the key; a rate below
// one per that unit is written per the next larger unit (1 per 90 s is 40 per hour). Envoy
// counts in fixed windows of the unit where switchboard's budget is a sliding one (GCRA).
func EnvoyRateLimit(l ratelimit.Limit) (uint32, typev3.RateLimitUnit) {
	period := int64(max(l.Period/time.Second, 1)) // whole seconds, as Validate has them
	for i, u := range envoyUnits {
		if u.d > l.Period {
			continue
		}
		n := l.Requests * int64(u.d/time.Second) / period
		if n == 0 && i > 0 {
			u = envoyUnits[i-1]
			n = l.Requests * int64(u.d/time.Second) / period
		}
		return uint32(min(n, math.MaxUint32)), u.unit //nolint:gosec // bounded just above
	}
	return uint32(min(l.Requests, math.MaxUint32)), typev3.RateLimitUnit_SECOND //nolint:gosec // a period under a second, which Validate refuses
}

// ExtAuthz serves Authorization/Check.
type ExtAuthz struct {
	authv3.UnimplementedAuthorizationServer
	checker *keycheck.Checker
	// stripAuthorization removes Authorization before the request goes upstream.
	stripAuthorization bool
	log                logr.Logger
}

// ExtAuthzOptions configure ExtAuthz.
type ExtAuthzOptions struct {
	// StripAuthorization removes the Authorization field before an allowed request goes
	// upstream, so backends never see keys.
	StripAuthorization bool
	// Logger receives a line per check at verbosity 1.
	Logger logr.Logger
}

// NewExtAuthz returns the Authorization service of checker's decision.
func NewExtAuthz(checker *keycheck.Checker, o ExtAuthzOptions) *ExtAuthz {
	return &ExtAuthz{checker: checker, stripAuthorization: o.StripAuthorization, log: o.Logger}
}

// Check decides one request Envoy is about to route.
func (s *ExtAuthz) Check(ctx context.Context, in *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	start := time.Now()
	attrs := in.GetAttributes()
	h := attrs.GetRequest().GetHttp()
	req := keycheck.Request{
		Authorization: headerValues(h, "authorization"),
		Audience:      attrs.GetContextExtensions()[AudienceExtension],
		Method:        h.GetMethod(),
		Path:          h.GetPath(),
		Now:           s.checker.Now(start),
		Proofs:        extAuthzProofs{attrs},
	}
	if peer := socketAddress(attrs.GetSource()); peer.IsValid() {
		req.Addr, req.AddrKnown = s.checker.ClientAddressFrom(peer, headerValues(h, "x-forwarded-for")), true
	}
	v := s.checker.Decide(ctx, &req)
	resp := s.response(&v)
	countCheck(protocolGRPC, &v, time.Since(start))
	if log := s.log.V(1); log.Enabled() {
		log.Info("check", "audience", req.Audience, "status", v.Status, "code", v.Code, "key", v.Hint(), "client", req.Addr.String())
	}
	return resp, nil
}

// response is v as Envoy's CheckResponse.
func (s *ExtAuthz) response(v *keycheck.Verdict) *authv3.CheckResponse {
	var rateLimit []*corev3.HeaderValueOption
	if policy, current, ok := v.RateLimitFields(); ok {
		rateLimit = []*corev3.HeaderValueOption{setHeader(ratelimit.FieldPolicy, policy), setHeader(ratelimit.FieldRateLimit, current)}
	}
	if v.Allowed() {
		key := v.Key()
		id, uid, hint := key.Namespace+"/"+key.Name, string(key.UID), asciiField(v.Hint())
		ok := &authv3.OkHttpResponse{
			Headers:              []*corev3.HeaderValueOption{setHeader(HeaderKey, id), setHeader(HeaderKeyUID, uid), setHeader(HeaderKeyHint, hint)},
			ResponseHeadersToAdd: rateLimit,
		}
		if s.stripAuthorization {
			ok.HeadersToRemove = []string{"authorization"}
		}
		facts := map[string]*structpb.Value{
			"namespace": structpb.NewStringValue(key.Namespace),
			"name":      structpb.NewStringValue(key.Name),
			"uid":       structpb.NewStringValue(uid),
			"hint":      structpb.NewStringValue(hint),
		}
		if key.RateLimit != nil && key.RateLimit.HasRate() {
			perUnit, unit := EnvoyRateLimit(key.RateLimit.Limit)
			facts[MetadataRateLimit] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				"requests_per_unit": structpb.NewNumberValue(float64(perUnit)),
				"unit":              structpb.NewStringValue(unit.String()),
			}})
		}
		return &authv3.CheckResponse{
			Status:       &rpcstatus.Status{Code: int32(codes.OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok},
			DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
				MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: facts}),
			}},
		}
	}
	headers := make([]*corev3.HeaderValueOption, 0, len(rateLimit)+5)
	headers = append(headers, rateLimit...)
	headers = append(headers,
		setHeader("Content-Type", "application/json"),
		setHeader("Cache-Control", "no-store"),
		setHeader(HeaderCode, v.Code))
	if ra := v.RetryAfter(); ra != "" {
		headers = append(headers, setHeader("Retry-After", ra))
	}
	if v.Challenge != "" {
		headers = append(headers, setHeader("WWW-Authenticate", v.Challenge))
	}
	var metadata *structpb.Struct
	if rule, text, ok := v.PermissionRule(); ok {
		headers = append(headers, setHeader(HeaderPermissionRule, rule), setHeader(HeaderPermissionRuleText, asciiField(text)))
		metadata = &structpb.Struct{Fields: map[string]*structpb.Value{
			MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				"permissionRule":     structpb.NewStringValue(rule),
				"permissionRuleText": structpb.NewStringValue(text),
			}}),
		}}
	}
	return &authv3.CheckResponse{
		DynamicMetadata: metadata,
		Status:          &rpcstatus.Status{Code: int32(grpcCode(v.Status)), Message: v.Code}, //nolint:gosec // gRPC codes are below 17
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(v.Status)}, //nolint:gosec // an HTTP status, below 600
			Headers: headers,
			Body:    string(apierror.JSON(v.Code, v.Message)),
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

// extAuthzProofs are the proofs of the request Envoy checks: the client's
// Switchboard-Workload-Token and DPoP header fields, the URL from the attributes' scheme, host
// and path, and the peer principal Envoy authenticated by mutual TLS (attributes.source.principal,
// as Istio sets it: spiffe://<trust domain>/ns/<namespace>/sa/<name>). The principal comes from
// the gateway, never from a header a client sends: it is worth what the gateway is, which is why
// only gateways may reach this port (authz.grpc.gateways).
type extAuthzProofs struct{ attrs *authv3.AttributeContext }

func (e extAuthzProofs) WorkloadToken() string {
	return keycheck.One(headerValues(e.attrs.GetRequest().GetHttp(), "switchboard-workload-token"))
}

func (e extAuthzProofs) DPoP() string {
	return keycheck.One(headerValues(e.attrs.GetRequest().GetHttp(), "dpop"))
}

func (e extAuthzProofs) PeerPrincipal() string { return e.attrs.GetSource().GetPrincipal() }

func (e extAuthzProofs) URL() string {
	h := e.attrs.GetRequest().GetHttp()
	if h.GetHost() == "" || h.GetScheme() == "" {
		return ""
	}
	return h.GetScheme() + "://" + h.GetHost() + h.GetPath()
}
