//go:build !unit

package fault

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// The attack of issue 29, item 1, at the scale it was reproduced, holding no key: CheckRequests
// of 4 MB (2,000,000 empty header_map entries, which grpc-go's default bound of 4 MiB lets
// through and which decode to some 150 MiB each), two at a time; and 50,000 streams opened on
// one HTTP/2 connection that never send their message, from each of four connections.
const (
	hugeHeaderEntries = 2_000_000
	idleStreams       = 50_000
	idleConns         = 4
	attackFor         = 12 * time.Second
)

// TestExtAuthzWithstandsAnonymousFloods runs bin/switchboard server with the ext_authz listener
// in a memory cgroup limited to the chart's 256 MiB, with the chart's $SWITCHBOARD_MEMORY_LIMIT,
// and performs the attacks above from 127.0.0.1 while a gateway at 127.0.0.2 sends a Check with
// a valid key every 100 ms. The server must not be killed, its memory and its sockets' kernel
// buffers together must stay under the limit, and every one of the gateway's Checks must be
// allowed within a second.
func TestExtAuthzWithstandsAnonymousFloods(t *testing.T) {
	cg := newMemCgroup(t, chartMemoryLimit)
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", kc, "--leader-elect=false")
	ns := env.Namespace(t, "gateway")
	key := issue(t, ns, "gateway")

	api, authz, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	server := startInCgroup(t, cg, "server", kc, []string{fmt.Sprintf("SWITCHBOARD_MEMORY_LIMIT=%d", chartMemoryLimit)},
		"server", "--listen="+api, "--authz-grpc-listen="+authz, "--metrics-bind-address="+metrics, "--metrics-secure=false",
		"--health-probe-bind-address=", "--system-namespace="+systemNamespace, "--shutdown-delay=0s")
	ctx := ctxFor(t, 5*time.Minute)

	// The gateway: its own connection from 127.0.0.2, as a second Envoy would have.
	gateway := dialFrom(t, "127.0.0.2", authz)
	check := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := authv3.NewAuthorizationClient(gateway).Check(ctx, checkRequest(key, nil))
		if err != nil {
			return err
		}
		if c := codes.Code(resp.GetStatus().GetCode()); c != codes.OK {
			return fmt.Errorf("denied: %s %v", c, resp.GetDeniedResponse().GetStatus().GetCode())
		}
		return nil
	}
	testenv.Eventually(t, 2*time.Minute, "the gateway's key allowed", func() error { return check(ctx) })

	mem := watchMemory(ctx, server.Pid(), cg, "http://"+metrics+"/metrics")
	time.Sleep(time.Second)
	baseline := mem.snapshot()

	var mu sync.Mutex
	var slow []string
	var checks int
	attackCtx, stopAttack := context.WithTimeout(ctx, attackFor)
	defer stopAttack()
	var wg sync.WaitGroup
	wg.Go(func() {
		checks, slow = sampleClient(attackCtx, func() error { return check(ctx) })
	})

	// 1. Huge CheckRequests, two at a time, for the attack's length.
	huge := checkRequest("", make([]*corev3.HeaderValue, hugeHeaderEntries))
	for i := range huge.Attributes.Request.Http.HeaderMap.Headers {
		huge.Attributes.Request.Http.HeaderMap.Headers[i] = &corev3.HeaderValue{}
	}
	attacker := dialFrom(t, "127.0.0.1", authz)
	hugeOutcomes := map[string]int{}
	for range 2 {
		wg.Go(func() {
			for attackCtx.Err() == nil {
				_, err := authv3.NewAuthorizationClient(attacker).Check(attackCtx, huge, grpc.MaxCallSendMsgSize(64<<20))
				mu.Lock()
				hugeOutcomes[status.Code(err).String()]++
				mu.Unlock()
			}
		})
	}
	// 2. Connections that open 50,000 streams each and never send a message.
	var opened, reset atomic.Int64
	for range idleConns {
		wg.Go(func() { openIdleStreams(attackCtx, t, authz, &opened, &reset) })
	}
	wg.Wait()
	during := mem.snapshot()
	mem.stop()
	oom := cg.oomControl(t)

	t.Logf("memory before the attack: %s; peak during it: %s; oom_control %v", baseline, during, oom)
	t.Logf("huge Checks by outcome: %v; idle streams opened %d, reset by the server %d; the gateway's Checks: %d, slow or failed: %d",
		hugeOutcomes, opened.Load(), reset.Load(), checks, len(slow))
	if server.Exited() {
		t.Fatalf("the server died during the attack: %v", server.Err())
	}
	if oom["oom_kill"] != 0 || oom["under_oom"] != 0 {
		t.Errorf("the kernel's OOM killer acted in the server's cgroup: %v", oom)
	}
	if sum := during.cgroup + during.tcp; sum >= chartMemoryLimit {
		t.Errorf("the server's memory and its sockets' buffers peaked at %.1f MiB together, the whole limit (%s)", mib(sum), during)
	}
	if len(slow) > 0 {
		t.Errorf("%d of the gateway's %d Checks were not allowed within a second: %s", len(slow), checks, strings.Join(slow, "; "))
	}
	if checks < int(attackFor/(500*time.Millisecond)) {
		t.Errorf("the gateway checked only %d times in %s", checks, attackFor)
	}
	if hugeOutcomes[codes.ResourceExhausted.String()] == 0 || hugeOutcomes[codes.OK.String()] != 0 {
		t.Errorf("the huge Checks: %v, want each refused ResourceExhausted", hugeOutcomes)
	}
	if opened.Load() < idleConns*idleStreams/2 {
		t.Errorf("only %d idle streams were opened: the attack did not happen as described", opened.Load())
	}
	if reset.Load() == 0 {
		t.Error("the server reset none of the idle streams")
	}
	if err := check(ctx); err != nil {
		t.Errorf("the gateway after the attack: %v", err)
	}
}

// checkRequest is a Check of a GET with the key as its bearer token, and headers in its
// header_map.
func checkRequest(key string, headers []*corev3.HeaderValue) *authv3.CheckRequest {
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "192.0.2.7"}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method:    "GET",
			Path:      "/v1/connections",
			Headers:   map[string]string{"authorization": "Bearer " + key},
			HeaderMap: &corev3.HeaderMap{Headers: headers},
		}},
	}}
}

// dialFrom is a gRPC client connection to addr from the local address from.
func dialFrom(t *testing.T, from, addr string) *grpc.ClientConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// openIdleStreams opens idleStreams streams of Check on one HTTP/2 connection from 127.0.0.1,
// sending their headers and never a message, reading (and counting the resets of) what the
// server sends, until ctx is done.
func openIdleStreams(ctx context.Context, t *testing.T, addr string, opened, reset *atomic.Int64) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Errorf("the idle-stream attacker could not connect: %v", err)
		return
	}
	defer func() { _ = c.Close() }()
	context.AfterFunc(ctx, func() { _ = c.Close() })
	h, err := startCheckStreams(c, addr, func(rst bool) {
		if rst {
			reset.Add(1)
		}
	})
	if err != nil {
		return
	}
	for range idleStreams {
		if ctx.Err() != nil || h.open() != nil {
			return
		}
		opened.Add(1)
	}
	<-ctx.Done()
}

// checkStreams is an HTTP/2 connection of an attacker opening Check streams that send their
// headers and never a message.
type checkStreams struct {
	fr      *http2.Framer
	writing *sync.Mutex // a Framer writes one frame at a time
	block   []byte      // the streams' header block
	next    uint32      // the next stream's id
	closed  chan struct{}
}

// startCheckStreams sends c the client preface and its settings, and reads what the server
// sends until c closes (closed), acknowledging its settings and calling ended for each stream it
// ends (rst: by RST_STREAM; else by its trailers).
func startCheckStreams(c net.Conn, authority string, ended func(rst bool)) (*checkStreams, error) {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", authv3.Authorization_Check_FullMethodName},
		{":authority", authority}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	h := &checkStreams{fr: http2.NewFramer(c, c), writing: &sync.Mutex{}, block: block.Bytes(), next: 1, closed: make(chan struct{})}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	if err := h.fr.WriteSettings(); err != nil {
		return nil, err
	}
	go func() {
		defer close(h.closed)
		rf := http2.NewFramer(nil, c)
		for {
			f, err := rf.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				ended(true)
			case *http2.HeadersFrame:
				if f.StreamEnded() {
					ended(false)
				}
			case *http2.SettingsFrame:
				if !f.IsAck() {
					h.writing.Lock()
					_ = h.fr.WriteSettingsAck()
					h.writing.Unlock()
				}
			}
		}
	}()
	return h, nil
}

// open opens the next stream: its headers, and never a message.
func (h *checkStreams) open() error {
	h.writing.Lock()
	defer h.writing.Unlock()
	err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.next, BlockFragment: h.block, EndHeaders: true})
	h.next += 2
	return err
}
