package frontdoor

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestStreamBudget(t *testing.T) {
	a, b, gw := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.9")
	type step struct {
		take     bool // false: give
		client   netip.Addr
		gateway  bool
		want     string
		reserved bool // take: where it counted; give: where it was counted
	}
	steps := []step{
		{true, a, false, "", false}, {true, a, false, "", false}, {true, a, false, "client_streams", false}, // a holds its 2
		{true, b, false, "", false}, {true, b, false, "streams", false}, // 3 anyone may take, in all
		{true, gw, true, "", true}, {true, gw, true, "", true}, // the gateways' own 2, though the rest are taken
		{true, gw, true, "streams", false},                        // and no more while the rest are
		{false, a, false, "", false}, {true, b, false, "", false}, // a gave one back: b takes its second
		{true, a, false, "streams", false},
		{false, b, false, "", false}, {true, gw, true, "", false}, // a gateway takes of the rest once its own are held,
		{true, gw, true, "streams", false},                              // bounded by them only, not per client
		{false, gw, true, "", true}, {true, a, false, "streams", false}, // its own back: no use to a client
		{false, gw, true, "", false}, {true, a, false, "", false}, {true, a, false, "streams", false},
	}
	budget := newStreamBudget(5, 2, 2)
	for i, s := range steps {
		if !s.take {
			budget.give(s.client, s.gateway, s.reserved)
			continue
		}
		reserved, got := budget.take(s.client, s.gateway)
		if got != s.want || reserved != s.reserved {
			t.Fatalf("step %d: take(%s, gateway %v) = %v, %q, want %v, %q", i, s.client, s.gateway, reserved, got, s.reserved, s.want)
		}
	}
	if budget.total != 3 || budget.reserved != 1 || len(budget.shares.held) != 2 {
		t.Fatalf("after the steps: %d of the rest, %d of the gateways' own, %v", budget.total, budget.reserved, budget.shares.held)
	}
}

// TestDecodeExpansion: the ext_authz request that grows most when decoded, a header_map of
// empty headers (2 bytes each on the wire), grows less than decodeExpansion times: the decode
// budget counts every request at least at what it takes. What it allocates is counted, the
// garbage of growing the slice included (about 70 times the wire size in all).
func TestDecodeExpansion(t *testing.T) {
	const entries = 100_000
	headers := make([]*corev3.HeaderValue, entries)
	for i := range headers {
		headers[i] = &corev3.HeaderValue{}
	}
	wire, err := proto.Marshal(&authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
		Http: &authv3.AttributeContext_HttpRequest{HeaderMap: &corev3.HeaderMap{Headers: headers}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var decoded authv3.CheckRequest
	if err := proto.Unmarshal(wire, &decoded); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes on the wire decoded into %d bytes (%.1f times)", len(wire), grew, float64(grew)/float64(len(wire)))
	if len(decoded.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders()) != entries {
		t.Fatal("the request did not decode whole")
	}
	if grew > uint64(len(wire))*decodeExpansion {
		t.Fatalf("decoding took %d bytes, more than %d times the %d on the wire", grew, decodeExpansion, len(wire))
	}
}

// serve runs a gRPC server with the door on loopback, serving health and a Check that allows.
func serve(t *testing.T, limits GRPCLimits) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	door := NewGRPC(limits, authv3.Authorization_Check_FullMethodName, healthpb.Health_Check_FullMethodName)
	srv := door.NewServer()
	authv3.RegisterAuthorizationServer(srv, allow{})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	e := door.Endpoint(l, srv, nil)
	go func() { _ = e.server.Serve(e.Listener) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

type allow struct {
	authv3.UnimplementedAuthorizationServer
}

func (allow) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{}, nil
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestGRPCDoor: through a real gRPC server and client, a request over the message bound and a
// method not served are refused, a Check and a health check are answered, and the decode
// budget is whole again once the calls are answered.
func TestGRPCDoor(t *testing.T) {
	limits := DefaultGRPCLimits
	limits.MaxMessage = 4 << 10
	addr := serve(t, limits)
	conn := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := authv3.NewAuthorizationClient(conn)
	if _, err := client.Check(ctx, &authv3.CheckRequest{}); err != nil {
		t.Fatalf("a small Check: %v", err)
	}
	big := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
		Http: &authv3.AttributeContext_HttpRequest{Body: strings.Repeat("x", 5<<10)}}}}
	if _, err := client.Check(ctx, big); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a Check over the message bound: %v, want ResourceExhausted", err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a health check: %v", err)
	}
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = watch.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("a health watch, which would hold a stream for ever: %v, want Unimplemented", err)
	}
	if _, err := client.Check(ctx, &authv3.CheckRequest{}); err != nil {
		t.Fatalf("a Check after the refusals: %v", err)
	}
}

// TestListenerBoundsEachClient: a client address holds at most its share of the connections;
// one past it is closed as it is accepted, and the client may connect again once one of its
// connections has closed. A proxy named exempt holds more.
func TestListenerBoundsEachClient(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := bound(raw, ConnLimits{MaxConnections: 10, MaxConnectionsPerClient: 2, Proxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}})
	t.Cleanup(func() { _ = l.Close() })
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	connect := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// closed says whether the server closed c (a read sees EOF) within a moment.
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err != nil && !strings.Contains(err.Error(), "timeout")
	}
	first, second := connect("127.0.0.1"), connect("127.0.0.1")
	held := []net.Conn{<-accepted, <-accepted}
	third := connect("127.0.0.1")
	if !closed(third) {
		t.Fatal("a third connection of one client was kept")
	}
	other := connect("127.0.0.2")
	<-accepted
	if closed(other) || closed(first) || closed(second) {
		t.Fatal("a connection within its client's share was closed")
	}
	_ = held[0].Close()
	again := connect("127.0.0.1")
	<-accepted
	if closed(again) {
		t.Fatal("the client could not connect again once one of its connections closed")
	}
	var proxied []net.Conn
	for range 3 {
		proxied = append(proxied, connect("127.0.0.3"))
		<-accepted
	}
	for _, c := range proxied {
		if closed(c) {
			t.Fatal("a connection of the exempt proxy was closed")
		}
	}
}
