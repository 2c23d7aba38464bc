// This file is the gRPC door (Envoy's ext_authz): grpc-go's defaults let one client hold
// hundreds of MiB (4 MiB messages, unbounded streams per connection, a flow-control window that
// grows to 16 MiB, no bound on the requests decoded at once), so each of those is bounded here.

package frontdoor

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/metrics"
)

// GRPCLimits bound a gRPC listener.
type GRPCLimits struct {
	// ConnLimits bound its connections in number (Listener); its Proxies are the gateways the
	// platform names, which carry many clients' checks: they are bounded by MaxConnections
	// only, ProxyConnections of which are theirs alone.
	ConnLimits
	// MaxMessage is the largest request message, in bytes; a larger one is refused
	// (ResourceExhausted) before it is decoded.
	MaxMessage int
	// MaxStreams bounds the calls in progress on the listener, all connections together;
	// MaxStreamsPerClient bounds those of one client address (an IPv6 client by its /64). A
	// call past either is refused at once (ResourceExhausted), before its message is read.
	// GatewayStreams of MaxStreams are kept for the gateways (Proxies, and with mutual TLS
	// every verified caller), which MaxStreamsPerClient does not bound.
	MaxStreams, MaxStreamsPerClient, GatewayStreams int
	// MaxStreamsPerConn is each connection's SETTINGS_MAX_CONCURRENT_STREAMS: further streams
	// are reset (REFUSED_STREAM) by the transport.
	MaxStreamsPerConn uint32
	// FirstMessage bounds the wait for a call's message after its headers: a gateway sends
	// both at once, so a call still without its message then is holding a place, and ends
	// (Canceled).
	FirstMessage time.Duration
	// CallTimeout bounds a call from its headers to its answer: a call not answered within it
	// ends (DeadlineExceeded) and frees what it held.
	CallTimeout time.Duration
	// DecodeBudget bounds the memory of the requests decoded and being answered at once, in
	// bytes, each counted at decodeExpansion times its size on the wire (the most a protobuf
	// message grows when decoded: an empty repeated sub-message is 2 bytes on the wire and a
	// Go struct of about a hundred and more). A decode waits for room, up to CallTimeout.
	DecodeBudget int64
	// Handshake bounds a connection's TLS handshake and HTTP/2 preface.
	Handshake time.Duration
	// MaxConnectionIdle, MaxConnectionAge and MaxConnectionAgeGrace end connections (with
	// GOAWAY) that carry no call for that long, or have lived that long.
	MaxConnectionIdle, MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// KeepaliveMinTime is the shortest interval between a client's keepalive pings; a client
	// pinging more often is sent GOAWAY (ENHANCE_YOUR_CALM).
	KeepaliveMinTime time.Duration
}

// Behind is l with gateways as the peers that carry many clients' checks.
func (l GRPCLimits) Behind(gateways []netip.Prefix) GRPCLimits {
	l.Proxies = gateways
	return l
}

// decodeExpansion is how many times its wire size a decoded request may take (see
// DecodeBudget); TestDecodeExpansion measures the worst message of the ext_authz API.
const decodeExpansion = 80

// maxHeaderList bounds a call's headers (its metadata): a Check carries none of its own.
const maxHeaderList = 64 << 10

// window is every stream's and connection's HTTP/2 flow-control window. Setting it turns off
// grpc-go's bandwidth-delay estimation, which grows the windows to 16 MiB per connection.
const window = 64 << 10

// DefaultGRPCLimits are the ext_authz listener's: a Check is a few KiB (Envoy's own header
// bound is 60 KiB by default; MaxMessage leaves room for a forwarded body, see
// --authz-grpc-max-message-bytes), answered in microseconds. One client address holds at most
// a sixteenth of the connections and calls anyone may take, so that eight addresses together
// leave half of them; the gateways have a quarter of their own.
var DefaultGRPCLimits = GRPCLimits{
	ConnLimits:            ConnLimits{MaxConnections: 256, MaxConnectionsPerClient: 12, ProxyConnections: 64},
	MaxMessage:            256 << 10,
	MaxStreams:            256,
	MaxStreamsPerClient:   12,
	GatewayStreams:        64,
	MaxStreamsPerConn:     64,
	FirstMessage:          time.Second,
	CallTimeout:           10 * time.Second,
	DecodeBudget:          64 << 20,
	Handshake:             5 * time.Second,
	MaxConnectionIdle:     5 * time.Minute,
	MaxConnectionAge:      30 * time.Minute,
	MaxConnectionAgeGrace: 30 * time.Second,
	KeepaliveMinTime:      10 * time.Second,
}

// grpcRefused counts the calls the door refused, by why.
var grpcRefused = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_frontdoor_grpc_refused_total", Help: "gRPC calls refused or ended by the listener's limits before they were answered, by limit (streams, client_streams, first_message, decode_budget); a message over the size bound is refused by gRPC itself, uncounted."}, []string{"limit"})

// GRPC is a gRPC door: its ServerOptions make a grpc.Server keep the limits, for the methods
// it names (any other is refused: a method not served must hold nothing either).
type GRPC struct {
	limits  GRPCLimits
	methods map[string]bool
	streams *streamBudget
	decode  *decodeBudget
}

// NewGRPC is a door with limits, serving only methods (full names, "/package.Service/Method").
func NewGRPC(limits GRPCLimits, methods ...string) *GRPC {
	g := &GRPC{limits: limits, methods: map[string]bool{}, streams: newStreamBudget(limits.MaxStreams, limits.MaxStreamsPerClient, limits.GatewayStreams),
		decode: &decodeBudget{sem: semaphore.NewWeighted(limits.DecodeBudget), max: limits.DecodeBudget, wait: limits.CallTimeout}}
	for _, m := range methods {
		g.methods[m] = true
	}
	return g
}

// serverOptions are the grpc.Server options that keep g's limits. Only unary methods are
// counted in the decode budget (switchboard serves no streaming one).
func (g *GRPC) serverOptions() []grpc.ServerOption {
	l := g.limits
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(l.MaxMessage),
		grpc.MaxConcurrentStreams(l.MaxStreamsPerConn),
		grpc.InitialWindowSize(window),
		grpc.InitialConnWindowSize(window),
		grpc.MaxHeaderListSize(maxHeaderList),
		grpc.ConnectionTimeout(l.Handshake),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: l.MaxConnectionIdle, MaxConnectionAge: l.MaxConnectionAge,
			MaxConnectionAgeGrace: l.MaxConnectionAgeGrace, Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.InTapHandle(g.admit),
		grpc.ForceServerCodecV2(&budgetCodec{CodecV2: encoding.GetCodecV2("proto"), budget: g.decode}),
		grpc.ChainUnaryInterceptor(g.decode.releaseAfter),
	}
}

// NewServer is a gRPC server that keeps g's limits, with extra options (its credentials):
// register its services, then serve it with Endpoint.
func (g *GRPC) NewServer(extra ...grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(g.serverOptions(), extra...)...)
}

// Endpoint serves srv (from NewServer) on l with g's connection bounds. beforeStop, when set,
// runs as the endpoint starts to drain (to fail the health service).
func (g *GRPC) Endpoint(l net.Listener, srv *grpc.Server, beforeStop func()) Endpoint {
	return Endpoint{
		Listener: bound(l, g.limits.ConnLimits),
		server:   &grpcServer{srv: srv, beforeStop: beforeStop},
	}
}

// grpcServer is a gRPC server as a Server: it stops with its group, draining calls.
type grpcServer struct {
	srv        *grpc.Server
	beforeStop func()
}

func (g *grpcServer) Serve(l net.Listener) error { return g.srv.Serve(l) }

func (g *grpcServer) Shutdown(ctx context.Context) error {
	if g.beforeStop != nil {
		g.beforeStop()
	}
	done := make(chan struct{})
	go func() {
		g.srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		g.srv.Stop()
		return ctx.Err()
	}
}

// admit runs as a stream opens, before its message is read (grpc-go's tap, under the
// transport's lock: it never waits). It refuses a method not served, and a call past the
// stream bounds; an admitted call ends unless its message arrives within FirstMessage, and
// within CallTimeout in any case, and frees its place when it ends.
func (g *GRPC) admit(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !g.methods[info.FullMethodName] {
		return nil, status.Errorf(codes.Unimplemented, "unknown method %s", info.FullMethodName)
	}
	var client netip.Addr
	gateway := false
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr := clientaddr.Parse(p.Addr.String())
		gateway = clientaddr.Trusted(addr, g.limits.Proxies) || verifiedClient(p)
		client = clientaddr.Bucket(addr)
	}
	reserved, limit := g.streams.take(client, gateway)
	if limit != "" {
		grpcRefused.WithLabelValues(limit).Inc()
		return nil, status.Errorf(codes.ResourceExhausted, "too many calls in progress (%s): try again", limit)
	}
	ctx, cancel := context.WithTimeout(ctx, g.limits.CallTimeout)
	call := &callState{}
	if g.limits.FirstMessage > 0 {
		call.late = time.AfterFunc(g.limits.FirstMessage, func() {
			if !call.arrived.Load() {
				grpcRefused.WithLabelValues("first_message").Inc()
				cancel()
			}
		})
	}
	// The stream's context ends with the stream, however it ends (answered, reset, its
	// connection closed) and at the latest at the timeout.
	context.AfterFunc(ctx, func() {
		cancel()
		if call.late != nil {
			call.late.Stop()
		}
		g.streams.give(client, gateway, reserved)
	})
	return context.WithValue(ctx, callKey{}, call), nil
}

// callState is what the door knows of a call in progress: whether its message has arrived.
type callState struct {
	arrived atomic.Bool
	late    *time.Timer // ends the call if its message has not arrived
}

// callKey keys a call's *callState in its context.
type callKey struct{}

// arrived notes that the call of ctx has its message (the unary interceptor: the message has
// been decoded).
func arrived(ctx context.Context) {
	if c, ok := ctx.Value(callKey{}).(*callState); ok {
		c.arrived.Store(true)
	}
}

// verifiedClient says whether p presented a client certificate the listener verified (mutual
// TLS): only the gateways hold one.
func verifiedClient(p *peer.Peer) bool {
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && len(info.State.VerifiedChains) > 0
}

// streamBudget counts the calls in progress: in all, per client, and the gateways' own.
type streamBudget struct {
	mu       sync.Mutex
	shared   int // the calls anyone may hold
	reserve  int // the calls only gateways hold
	total    int // held of shared
	reserved int // held of reserve
	shares   *clientShares
}

func newStreamBudget(all, perClient, gateways int) *streamBudget {
	gateways = min(max(gateways, 0), all)
	return &streamBudget{shared: all - gateways, reserve: gateways, shares: newClientShares(perClient)}
}

// take counts one call of client (a gateway's in their own calls first, then in the rest, and
// bounded per client only if it is no gateway's), and says whether it took one of the
// gateways' own; or it says which bound refuses the call.
func (b *streamBudget) take(client netip.Addr, gateway bool) (reserved bool, refused string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case gateway && b.reserved < b.reserve:
		b.reserved++
		return true, ""
	case b.total >= b.shared:
		return false, "streams"
	case !gateway && !b.shares.take(client):
		return false, "client_streams"
	}
	b.total++
	return false, ""
}

// give counts one call less, as take counted it.
func (b *streamBudget) give(client netip.Addr, gateway, reserved bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if reserved {
		b.reserved--
		return
	}
	b.total--
	if !gateway {
		b.shares.give(client)
	}
}

// decodeBudget is the memory of the requests decoded and being answered: the codec takes a
// request's share before decoding it, and the interceptor gives it back once the call is
// answered (the decoded request lives until then). Shares are held by request.
type decodeBudget struct {
	sem  *semaphore.Weighted
	max  int64
	wait time.Duration
	held sync.Map // request (pointer) → its share
}

// take holds n bytes of the budget (n at most its whole), waiting up to b.wait for room.
func (b *decodeBudget) take(n int64) bool {
	if b.sem.TryAcquire(n) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.wait)
	defer cancel()
	return b.sem.Acquire(ctx, n) == nil
}

// releaseAfter is the unary interceptor: it notes that the call's message arrived, and gives
// back req's share once the call is answered.
func (b *decodeBudget) releaseAfter(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	arrived(ctx)
	defer func() {
		if n, ok := b.held.LoadAndDelete(req); ok {
			b.sem.Release(n.(int64))
		}
	}()
	return handler(ctx, req)
}

// budgetCodec is protobuf's codec, decoding only within the budget.
type budgetCodec struct {
	encoding.CodecV2
	budget *decodeBudget
}

func (c *budgetCodec) Unmarshal(data mem.BufferSlice, v any) error {
	n := min(int64(data.Len())*decodeExpansion, c.budget.max)
	if !c.budget.take(n) {
		grpcRefused.WithLabelValues("decode_budget").Inc()
		return status.Error(codes.ResourceExhausted, "too many requests being decoded: try again")
	}
	if err := c.CodecV2.Unmarshal(data, v); err != nil {
		c.budget.sem.Release(n)
		return err
	}
	c.budget.held.Store(v, n)
	return nil
}
