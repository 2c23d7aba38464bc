//go:build !unit

package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/utils/clock"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	frontdoor "github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/authz"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

// authzServer is a server with both authorization listeners, and a gRPC client of its Check.
type authzServer struct {
	*testServer
	httpURL string
	grpc    authv3.AuthorizationClient
	health  healthpb.HealthClient
}

func startAuthzServer(t *testing.T, c *sc, deps Deps, wait bool) *authzServer {
	t.Helper()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deps.AuthzGRPCListener, deps.AuthzHTTPListener = gl, hl
	s := startServer(t, nil, c, deps, wait)
	conn, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &authzServer{testServer: s, httpURL: "http://" + hl.Addr().String(),
		grpc: authv3.NewAuthorizationClient(conn), health: healthpb.NewHealthClient(conn)}
}

// call is one request as every protocol asks it: its key (or raw Authorization), the client's
// address, and the route's audience.
type call struct {
	authorization string // the whole field; empty sends none
	client        string // the client's address: X-Forwarded-For behind the trusted loopback, Envoy's source
	audience      string
}

func withBearer(key string) string { return "Bearer " + key }

// realm is the challenge of every 401 (RFC 6750 section 3).
const realm = `Bearer realm="switchboard"`

// answer is what a gateway would do with a decision: a status, the error code, the header
// fields to the client (RateLimit, Retry-After, WWW-Authenticate) and, when allowed, those to
// the upstream (the key's identity).
type answer struct {
	status   int
	code     string
	client   http.Header
	upstream http.Header
	// envoyLimit is ext_authz's rate limit override for Envoy ("4 per HOUR"), "" when none.
	envoyLimit string
}

// protocolCase asks one protocol.
type protocolCase struct {
	name string
	ask  func(t *testing.T, c call) answer
}

func (s *authzServer) protocols() []protocolCase {
	return []protocolCase{
		{"/v1", s.askV1},
		{"forward-auth", func(t *testing.T, c call) answer { return s.askHTTP(t, authz.ForwardAuthPath, c) }},
		{"forward-auth nginx", func(t *testing.T, c call) answer { return s.askHTTP(t, authz.ForwardAuthNginxPath, c) }},
		{"ext_authz gRPC", s.askGRPC},
	}
}

func httpAnswer(t *testing.T, resp response) answer {
	t.Helper()
	a := answer{status: resp.Status, client: http.Header{}, upstream: http.Header{}}
	for _, name := range []string{"Ratelimit-Policy", "Ratelimit", "Retry-After", "Www-Authenticate"} {
		if v := resp.Header.Get(name); v != "" {
			a.client.Set(name, v)
		}
	}
	for _, name := range []string{authz.HeaderKey, authz.HeaderKeyUID, authz.HeaderKeyHint} {
		if v := resp.Header.Get(name); v != "" {
			a.upstream.Set(name, v)
		}
	}
	if resp.Status != http.StatusOK {
		a.code = resp.errorCode(t)
	}
	return a
}

func (s *authzServer) askV1(t *testing.T, c call) answer {
	t.Helper()
	return httpAnswer(t, s.request(t, http.MethodGet, "/v1/connections", func(h http.Header) {
		if c.authorization != "" {
			h.Set("Authorization", c.authorization)
		}
		h.Set("X-Forwarded-For", c.client)
	}))
}

func (s *authzServer) askHTTP(t *testing.T, prefix string, c call) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.httpURL+prefix+"/"+c.audience, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.authorization != "" {
		req.Header.Set("Authorization", c.authorization)
	}
	req.Header.Set("X-Forwarded-For", c.client)
	resp := s.do(t, req)
	a := httpAnswer(t, resp)
	if resp.Status != http.StatusOK && resp.Header.Get(authz.HeaderCode) != a.code {
		t.Errorf("%s: %s is %q, the body's code %q", prefix, authz.HeaderCode, resp.Header.Get(authz.HeaderCode), a.code)
	}
	return a
}

func checkRequestOf(c call) *authv3.CheckRequest {
	headers := map[string]string{":method": "GET", ":path": "/anything"}
	if c.authorization != "" {
		headers["authorization"] = c.authorization
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: c.client, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}},
		}}},
		Request:           &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/anything", Headers: headers}},
		ContextExtensions: map[string]string{authz.AudienceExtension: c.audience},
	}}
}

// grpcAnswer reads a CheckResponse as Envoy would act on it.
func grpcAnswer(t *testing.T, resp *authv3.CheckResponse) answer {
	t.Helper()
	a := answer{client: http.Header{}, upstream: http.Header{}}
	if codes.Code(resp.GetStatus().GetCode()) == codes.OK {
		ok := resp.GetOkResponse()
		if ok == nil {
			t.Fatalf("OK without ok_response: %v", resp)
		}
		a.status = http.StatusOK
		for _, h := range ok.GetHeaders() {
			if h.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
				t.Errorf("upstream header %s would not replace a client's own: %v", h.GetHeader().GetKey(), h.GetAppendAction())
			}
			a.upstream.Set(h.GetHeader().GetKey(), h.GetHeader().GetValue())
		}
		for _, h := range ok.GetResponseHeadersToAdd() {
			a.client.Set(h.GetHeader().GetKey(), h.GetHeader().GetValue())
		}
		md := resp.GetDynamicMetadata().GetFields()[authz.MetadataNamespace].GetStructValue().GetFields()
		for field, header := range map[string]string{"uid": authz.HeaderKeyUID, "hint": authz.HeaderKeyHint} {
			if md[field].GetStringValue() != a.upstream.Get(header) {
				t.Errorf("dynamic metadata %s %q, header %q", field, md[field].GetStringValue(), a.upstream.Get(header))
			}
		}
		if id := md["namespace"].GetStringValue() + "/" + md["name"].GetStringValue(); id != a.upstream.Get(authz.HeaderKey) {
			t.Errorf("dynamic metadata names %s, the header %s", id, a.upstream.Get(authz.HeaderKey))
		}
		if rl := md[authz.MetadataRateLimit].GetStructValue(); rl != nil {
			// Read as Envoy reads it: the override message of its rate limit descriptors.
			raw, err := protojson.Marshal(rl)
			if err != nil {
				t.Fatal(err)
			}
			var override ratelimitv3.RateLimitDescriptor_RateLimitOverride
			if err := protojson.Unmarshal(raw, &override); err != nil {
				t.Fatalf("the rate limit metadata %s is not Envoy's override: %v", raw, err)
			}
			a.envoyLimit = fmt.Sprintf("%d per %s", override.GetRequestsPerUnit(), override.GetUnit())
		}
		return a
	}
	denied := resp.GetDeniedResponse()
	if denied == nil || denied.GetStatus() == nil {
		t.Fatalf("a denial without denied_response or its status (Envoy would answer 403): %v", resp)
	}
	a.status = int(denied.GetStatus().GetCode())
	headerCode := ""
	for _, h := range denied.GetHeaders() {
		switch k := h.GetHeader().GetKey(); k {
		case authz.HeaderCode:
			headerCode = h.GetHeader().GetValue()
		case "Content-Type":
			if h.GetHeader().GetValue() != "application/json" {
				t.Errorf("denial Content-Type %q", h.GetHeader().GetValue())
			}
		case "Cache-Control":
		default:
			a.client.Set(k, h.GetHeader().GetValue())
		}
	}
	a.code = (response{Status: a.status, Body: []byte(denied.GetBody())}).errorCode(t)
	if headerCode != a.code || resp.GetStatus().GetMessage() != a.code {
		t.Errorf("denial code: body %q, %s %q, gRPC message %q", a.code, authz.HeaderCode, headerCode, resp.GetStatus().GetMessage())
	}
	return a
}

func (s *authzServer) askGRPC(t *testing.T, c call) answer {
	t.Helper()
	resp, err := s.grpc.Check(ctx(t), checkRequestOf(c))
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return grpcAnswer(t, resp)
}

// want is the answer a protocol must give; nginx's mode answers 403 for every denial but 401.
// /v1 sends no identity upstream: it is the upstream.
func (w answer) forProtocol(name string) answer {
	if name == "/v1" {
		w.upstream = http.Header{}
	}
	if name == "forward-auth nginx" && w.status != http.StatusOK && w.status != http.StatusUnauthorized {
		w.status = http.StatusForbidden
	}
	return w
}

// TestOneDecisionEverywhere: every row of the decision table, over /v1, forward-auth (both
// modes) and ext_authz over a real gRPC connection, gives the same status, code and header
// fields; a rate limit's budget is one for all of them.
func TestOneDecisionEverywhere(t *testing.T) {
	ns := env.Namespace(t, "authz")
	newConnection(t, ns, "a", "conn_a", nil)
	plain := newKey(t, ns, "plain", switchboardv1alpha1.APIKeySpec{})
	billing := newKey(t, ns, "billing", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{"billing"}})
	both := newKey(t, ns, "both", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{"billing", "connections"}})
	partner := newKey(t, ns, "partner", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"192.0.2.0/24"}})
	meteredSpec := rateLimited(4, time.Hour)
	meteredSpec.Audiences = []switchboardv1alpha1.Audience{"connections"}
	metered := newKey(t, ns, "metered", meteredSpec)
	s := startAuthzServer(t, &sc{AuthFailureLimit: failureLimit(0.0001, 10), TrustedProxies: []string{"127.0.0.1/32"}}, Deps{}, true)
	// Known once not 401; asked for an audience the metered key lacks, so its budget is intact.
	for _, k := range []*keyFixture{plain, billing, both, partner, metered} {
		eventually(t, "the server knows "+k.APIKey.Name, func() bool {
			return s.askHTTP(t, authz.ForwardAuthPath, call{authorization: withBearer(k.Key), client: "192.0.2.1", audience: "billing"}).status != http.StatusUnauthorized
		})
	}
	identity := func(k *keyFixture) http.Header {
		return http.Header{authz.HeaderKey: {ns + "/" + k.APIKey.Name}, authz.HeaderKeyUID: {string(k.APIKey.UID)}, authz.HeaderKeyHint: {asciiHint(apikey.Hint(k.Key))}}
	}
	challenge := func(v string) http.Header { return http.Header{"Www-Authenticate": {v}} }
	rows := []struct {
		name string
		call call
		// v1 says whether /v1 can be asked this (its audience is its own, "connections").
		v1   bool
		want answer
	}{
		{"valid", call{withBearer(plain.Key), "198.51.100.1", "connections"}, true,
			answer{status: 200, client: http.Header{}, upstream: identity(plain)}},
		{"missing", call{"", "198.51.100.2", "connections"}, true,
			answer{status: 401, code: apicode.APIKeyMissing, client: challenge(realm), upstream: http.Header{}}},
		{"malformed", call{"Basic dXNlcjpwYXNz", "198.51.100.3", "connections"}, true,
			answer{status: 401, code: apicode.APIKeyMissing, client: challenge(realm + `, error="invalid_request"`), upstream: http.Header{}}},
		{"unknown key", call{withBearer("sb_live_" + strings.Repeat("x", 43)), "198.51.100.4", "connections"}, true,
			answer{status: 401, code: apicode.APIKeyInvalid, client: challenge(realm + `, error="invalid_token"`), upstream: http.Header{}}},
		{"audience B key on route A", call{withBearer(billing.Key), "198.51.100.5", "connections"}, true,
			answer{status: 403, code: apicode.AudienceNotAllowed, client: http.Header{}, upstream: http.Header{}}},
		{"audience B key on route B", call{withBearer(billing.Key), "198.51.100.5", "billing"}, false,
			answer{status: 200, client: http.Header{}, upstream: identity(billing)}},
		{"audience A or B key on route A", call{withBearer(both.Key), "198.51.100.5", "connections"}, true,
			answer{status: 200, client: http.Header{}, upstream: identity(both)}},
		{"audience A or B key on route C", call{withBearer(both.Key), "198.51.100.5", "search"}, false,
			answer{status: 403, code: apicode.AudienceNotAllowed, client: http.Header{}, upstream: http.Header{}}},
		{"a route without an audience takes only keys without audiences", call{withBearer(both.Key), "198.51.100.5", ""}, false,
			answer{status: 403, code: apicode.AudienceNotAllowed, client: http.Header{}, upstream: http.Header{}}},
		{"a key without audiences on a route without one", call{withBearer(plain.Key), "198.51.100.5", ""}, false,
			answer{status: 200, client: http.Header{}, upstream: identity(plain)}},
		{"source inside", call{withBearer(partner.Key), "192.0.2.77", "connections"}, true,
			answer{status: 200, client: http.Header{}, upstream: identity(partner)}},
		{"source outside", call{withBearer(partner.Key), "198.51.100.6", "connections"}, true,
			answer{status: 403, code: apicode.SourceNotAllowed, client: http.Header{}, upstream: http.Header{}}},
	}
	for _, p := range s.protocols() {
		for _, row := range rows {
			if p.name == "/v1" && !row.v1 {
				continue
			}
			t.Run(p.name+"/"+row.name, func(t *testing.T) {
				want := row.want.forProtocol(p.name)
				got := p.ask(t, row.call)
				if got.status != want.status || got.code != want.code || !sameHeader(got.client, want.client) || !sameHeader(got.upstream, want.upstream) {
					t.Errorf("got %d %s, to the client %v, upstream %v;\nwant %d %s, %v, %v", got.status, got.code, got.client, got.upstream,
						want.status, want.code, want.client, want.upstream)
				}
			})
		}
	}

	// One rate-limit budget: four requests of a key allowed 4 per hour, one per protocol, then
	// every protocol refuses it, with Retry-After and the RateLimit fields.
	metCall := call{withBearer(metered.Key), "198.51.100.7", "connections"}
	for i, p := range s.protocols() {
		got := p.ask(t, metCall)
		wantNow := `"apikey";r=` + string(rune('3'-i)) + ";t=900"
		if got.status != 200 || got.client.Get("Ratelimit-Policy") != `"apikey";q=4;w=3600` || got.client.Get("Ratelimit") != wantNow {
			t.Errorf("%s, request %d of the budget: %d, RateLimit-Policy %q, RateLimit %q, want 200, %q", p.name, i+1, got.status,
				got.client.Get("Ratelimit-Policy"), got.client.Get("Ratelimit"), wantNow)
		}
		if wantEnvoy := map[bool]string{true: "4 per HOUR"}[p.name == "ext_authz gRPC"]; got.envoyLimit != wantEnvoy {
			t.Errorf("%s: the key's own limit for Envoy %q, want %q", p.name, got.envoyLimit, wantEnvoy)
		}
	}
	for _, p := range s.protocols() {
		got := p.ask(t, metCall)
		want := answer{status: 429, code: apicode.KeyRateLimited}.forProtocol(p.name)
		if got.status != want.status || got.code != want.code || got.client.Get("Retry-After") != "900" || got.client.Get("Ratelimit") != `"apikey";r=0;t=900` {
			t.Errorf("%s past the budget: %d %s, Retry-After %q, RateLimit %q; want %d %s, 900", p.name, got.status, got.code,
				got.client.Get("Retry-After"), got.client.Get("Ratelimit"), want.status, want.code)
		}
	}

	// The failure limiter: an address out of failures gets 429 RATE_LIMITED everywhere, for
	// failures only; a valid key from the same address is answered.
	guesser := call{withBearer("sb_live_" + strings.Repeat("y", 43)), "203.0.113.9", "connections"}
	for range 10 {
		if got := s.askGRPC(t, guesser); got.status != http.StatusUnauthorized {
			t.Fatalf("a guess within the burst: %d", got.status)
		}
	}
	for _, p := range s.protocols() {
		got := p.ask(t, guesser)
		want := answer{status: 429, code: apicode.RateLimited}.forProtocol(p.name)
		if got.status != want.status || got.code != want.code || got.client.Get("Retry-After") == "" {
			t.Errorf("%s: a guess past the burst: %d %s, Retry-After %q; want %d %s", p.name, got.status, got.code, got.client.Get("Retry-After"), want.status, want.code)
		}
		if got := p.ask(t, call{withBearer(plain.Key), guesser.client, "connections"}); got.status != http.StatusOK {
			t.Errorf("%s: a valid key from the guessing address: %d %s", p.name, got.status, got.code)
		}
	}

	// A revocation is seen by every protocol within one watch event.
	revokedAt := time.Now()
	patchSpec(t, plain.APIKey, func(spec *switchboardv1alpha1.APIKeySpec) { spec.Revoked = true })
	for _, p := range s.protocols() {
		eventually(t, p.name+" refuses the revoked key", func() bool {
			return p.ask(t, call{withBearer(plain.Key), "198.51.100.8", "connections"}).code == apicode.APIKeyInvalid
		})
		t.Logf("%s refused the revoked key %v after the update", p.name, time.Since(revokedAt).Round(time.Millisecond))
	}

	// The metrics count decisions by protocol, result and code, never by key.
	if got := metricValue(t, "switchboard_authz_checks_total", "code", apicode.AudienceNotAllowed); got < 2 {
		t.Errorf("switchboard_authz_checks_total{code=%s} = %v, want the refusals counted", apicode.AudienceNotAllowed, got)
	}
}

// sameHeader compares header fields by canonical name and first value.
func sameHeader(got, want http.Header) bool {
	if len(got) != len(want) {
		return false
	}
	for k := range want {
		if got.Get(k) != want.Get(k) {
			return false
		}
	}
	return true
}

// TestNotReadyIsADenial: before the index has synced, every protocol refuses with 503
// NOT_READY — over gRPC as a denied_response, not an RPC error, so that a gateway set to fail
// open still fails closed — and gRPC health says NOT_SERVING.
func TestNotReadyIsADenial(t *testing.T) {
	h := &host{c: &sc{}, log: logr.Discard()}
	configv1alpha1.SetDefaults_ServerConfiguration(h.c)
	ready := new(atomic.Bool)
	checker, err := keycheck.New(keycheck.Config{Index: keyindex.New(), Ready: ready, KeyPrefix: h.c.KeyPrefix, Clock: clock.RealClock{},
		FailureRate: 1, FailureBurst: 20, FailureClients: 1024})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.deps.AuthzGRPCListener = l
	e, setServing, err := h.extAuthz(context.Background(), checker)
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(context.Background())
	go func() {
		_ = frontdoor.Group{Listeners: []frontdoor.Listener{e}, ShutdownTimeout: time.Second, Log: logr.Discard()}.Run(run)
	}()
	t.Cleanup(stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	client := authv3.NewAuthorizationClient(conn)
	serving := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := health.Check(ctx(t), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		return resp.GetStatus()
	}
	if got := serving(authv3.Authorization_ServiceDesc.ServiceName); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health before the sync: %v", got)
	}
	resp, err := client.Check(ctx(t), checkRequestOf(call{withBearer("sb_live_x"), "192.0.2.1", "connections"}))
	if err != nil {
		t.Fatalf("Check before the sync returned an RPC error (a fail-open gateway would let it through): %v", err)
	}
	got := grpcAnswer(t, resp)
	if got.status != http.StatusServiceUnavailable || got.code != apicode.NotReady || got.client.Get("Retry-After") != "1" {
		t.Errorf("gRPC before the sync: %d %s %v", got.status, got.code, got.client)
	}
	if codes.Code(resp.GetStatus().GetCode()) != codes.Unavailable {
		t.Errorf("gRPC status %v", codes.Code(resp.GetStatus().GetCode()))
	}
	rec := httptest.NewRecorder()
	authz.NewForwardAuth(checker, logr.Discard()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/authz/connections", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(authz.HeaderCode) != apicode.NotReady || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("forward-auth before the sync: %d %s", rec.Code, rec.Header().Get(authz.HeaderCode))
	}
	setServing()
	ready.Store(true)
	if got := serving(""); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health after the sync: %v", got)
	}
}

// TestForwardAuthIgnoresForgedForwardedFor performs the guessing attack on the forward-auth
// endpoint from a pod that reaches it directly, forging a new X-Forwarded-For for every guess:
// the endpoint believes X-Forwarded-For only from --trusted-proxies, so all 1,000 guesses count
// against the caller's own address and all but the burst get 429, while a valid key from the
// same address is still answered.
func TestForwardAuthIgnoresForgedForwardedFor(t *testing.T) {
	ns := env.Namespace(t, "forged")
	k := newKey(t, ns, "k", switchboardv1alpha1.APIKeySpec{})
	s := startAuthzServer(t, &sc{AuthFailureLimit: failureLimit(0.0001, 20)}, Deps{}, true)
	eventually(t, "the server knows the key", func() bool {
		return s.askHTTP(t, authz.ForwardAuthPath, call{withBearer(k.Key), "192.0.2.1", "connections"}).status == http.StatusOK
	})
	limited := 0
	for i := range 1000 {
		guess := call{withBearer("sb_live_" + strings.Repeat("z", 43)), netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}).String(), "connections"}
		if s.askHTTP(t, authz.ForwardAuthPath, guess).code == apicode.RateLimited {
			limited++
		}
	}
	if answered := 1000 - limited; answered > 20 {
		t.Errorf("%d of 1000 guesses with forged addresses were judged, want at most the burst of 20", answered)
	}
	if got := s.askHTTP(t, authz.ForwardAuthPath, call{withBearer(k.Key), "192.0.2.1", "connections"}); got.status != http.StatusOK {
		t.Errorf("a valid key from the guessing address: %d %s", got.status, got.code)
	}
}

// asciiHint is a hint as a header field carries it: ASCII, the ellipsis spelled "...".
func asciiHint(hint string) string { return strings.ReplaceAll(hint, "…", "...") }
