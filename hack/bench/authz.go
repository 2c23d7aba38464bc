package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// The "authz" part: Envoy's ext_authz over gRPC. switchboard's Check against a trivial
// always-allow Authorization server built from the same libraries (go-control-plane, grpc-go)
// that answers every Check with the very message switchboard answered for the same key
// (captured, so both send the same bytes): the protocol's limit on this machine. Closed loop,
// rounds interleaved, rotating who goes first; the median of each is reported.

// authzResult is the part's measurements.
type authzResult struct {
	conns, callers         int
	duration               time.Duration
	bareRPS, authRPS       []float64
	bareLat, authLat       []time.Duration // every round's latencies, together
	loadBefore, loadAfter  string
	responseBytes          int
	bareErrors, authErrors int
}

const (
	authzConns   = 2  // HTTP/2 connections, as Envoy opens about one per worker thread
	authzCallers = 32 // concurrent Check calls, as wrk's 32 connections in part 1
)

func checkRequestFor(key string) *authv3.CheckRequest {
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "192.0.2.10", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}},
		}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "GET", Path: "/v1/invoices", Host: "api.example.com",
			Headers: map[string]string{":method": "GET", ":path": "/v1/invoices", ":authority": "api.example.com", "authorization": "Bearer " + key, "user-agent": "bench"},
		}},
		ContextExtensions: map[string]string{"switchboard.dev/audience": "connections"},
	}}
}

// checkLoad calls Check from callers goroutines over conns connections for d (after a warm-up
// of a second), and returns requests per second and every OK call's latency.
func checkLoad(ctx context.Context, addr string, req *authv3.CheckRequest, d time.Duration) (float64, []time.Duration, int, error) {
	clients := make([]authv3.AuthorizationClient, authzConns)
	for i := range clients {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return 0, nil, 0, err
		}
		defer conn.Close()
		clients[i] = authv3.NewAuthorizationClient(conn)
	}
	var measuring atomic.Bool
	var errs atomic.Int64
	lats := make([][]time.Duration, authzCallers)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range authzCallers {
		wg.Go(func() {
			c := clients[i%authzConns]
			for runCtx.Err() == nil {
				start := time.Now()
				resp, err := c.Check(runCtx, req)
				if !measuring.Load() {
					continue
				}
				if err != nil || resp.GetStatus().GetCode() != int32(codes.OK) {
					if runCtx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				lats[i] = append(lats[i], time.Since(start))
			}
		})
	}
	time.Sleep(time.Second)
	measuring.Store(true)
	started := time.Now()
	time.Sleep(d)
	measuring.Store(false)
	elapsed := time.Since(started)
	cancel()
	wg.Wait()
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return float64(len(all)) / elapsed.Seconds(), all, int(errs.Load()), nil
}

// serveBareAuthz serves an always-allow Authorization answering the message in responseFile.
func serveBareAuthz(addr, responseFile string) error {
	raw, err := os.ReadFile(filepath.Clean(responseFile))
	if err != nil {
		return err
	}
	resp := &authv3.CheckResponse{}
	if err := proto.Unmarshal(raw, resp); err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	authv3.RegisterAuthorizationServer(srv, alwaysAllow{resp: resp})
	return srv.Serve(l)
}

type alwaysAllow struct {
	authv3.UnimplementedAuthorizationServer
	resp *authv3.CheckResponse
}

func (a alwaysAllow) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return a.resp, nil
}

func (r *rig) authz(ctx context.Context, o options) error {
	_, keys, err := r.tenant(ctx, "bench-authz", 0, "gateway")
	if err != nil {
		return err
	}
	req := checkRequestFor(keys["gateway"])
	conn, err := grpc.NewClient(r.authzAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := authv3.NewAuthorizationClient(conn)
	var captured *authv3.CheckResponse
	deadline := time.Now().Add(time.Minute)
	for captured == nil {
		resp, err := client.Check(ctx, req)
		if err == nil && resp.GetStatus().GetCode() == int32(codes.OK) {
			captured = resp
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("switchboard never allowed the key over ext_authz (last answer %v): %w", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	raw, err := proto.Marshal(captured)
	if err != nil {
		return err
	}
	bare, bareAddr, err := r.startSelf("authz-bare", "authz-response.pb", raw, func(addr, path string) []string {
		return []string{"-bare-authz-listen=" + addr, "-bare-authz-response=" + path}
	})
	if err != nil {
		return err
	}
	defer bare.stop()

	res := &authzResult{conns: authzConns, callers: authzCallers, duration: o.duration, responseBytes: len(raw), loadBefore: loadAverage()}
	sides := []struct {
		addr string
		rps  *[]float64
		lats *[]time.Duration
		errs *int
	}{{r.authzAddr, &res.authRPS, &res.authLat, &res.authErrors}, {bareAddr, &res.bareRPS, &res.bareLat, &res.bareErrors}}
	for round := range o.rounds {
		for i := range sides { // rotate who goes first, so that drift favours none
			s := sides[(i+round)%len(sides)]
			rps, lats, errs, err := checkLoad(ctx, s.addr, req, o.duration)
			if err != nil {
				return err
			}
			*s.rps, *s.lats, *s.errs = append(*s.rps, rps), append(*s.lats, lats...), *s.errs+errs
		}
	}
	res.loadAfter = loadAverage()
	slices.Sort(res.bareLat)
	slices.Sort(res.authLat)
	r.report.authz = res
	return nil
}

func (r *report) writeAuthz(p printer) {
	res := r.authz
	bare, auth := median(res.bareRPS), median(res.authRPS)
	p("## 10. Envoy ext_authz (gRPC Check)")
	p("")
	p("`switchboard server --authz-grpc-listen` against a trivial always-allow `Authorization` server built from the same")
	p("libraries (go-control-plane, grpc-go), which answers every call with the very message switchboard answered for the")
	p("same key (%d bytes: OK, the three identity headers, dynamic metadata), so the difference is the decision. %d callers", res.responseBytes, res.callers)
	p("over %d HTTP/2 connections, closed loop, %s per round after a 1 s warm-up, %d rounds interleaved (rotating who goes", res.conns, res.duration, len(res.authRPS))
	p("first), the load generator in the bench process on the same cores. Load average before and after: %s, %s.", res.loadBefore, res.loadAfter)
	p("")
	p("| server | Check/s (median) | all rounds | p50 | p99 | errors |")
	p("|---|---|---|---|---|---|")
	p("| always-allow | %.0f | %s | %s | %s | %d |", bare, floats(res.bareRPS, 0), ms(percentile(res.bareLat, 0.5)), ms(percentile(res.bareLat, 0.99)), res.bareErrors)
	p("| switchboard | %.0f | %s | %s | %s | %d |", auth, floats(res.authRPS, 0), ms(percentile(res.authLat, 0.5)), ms(percentile(res.authLat, 0.99)), res.authErrors)
	p("")
	p("**Ratio: %.2f** of the always-allow server's throughput (target ≥ 0.90). No Envoy binary can be had on these", auth/bare)
	p("machines (no Debian package; its installers download), so the client is grpc-go, as Envoy's Google gRPC client would be.")
	p("")
}
