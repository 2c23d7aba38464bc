package frontdoor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readAnswer reads one answer from c, within 5 s.
func readAnswer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestBodiesReadByTheDoor: on a door that reads bodies, the handler gets the whole body from
// memory; a body larger than the door reads is refused unread, declared or chunked; a body its
// client holds back never reaches a handler and ends at the body phase's bound.
func TestBodiesReadByTheDoor(t *testing.T) {
	limits := DefaultHTTPLimits
	limits.MaxBody, limits.Body = 16, 300*time.Millisecond
	handled := make(chan string, 10)
	addr, _ := serveLimited(t, limits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		handled <- r.URL.Path
		_, _ = fmt.Fprintf(w, "%d %q %v", r.ContentLength, body, err)
	}))
	for _, tc := range []struct {
		name, request string
		status        int
		answer        string
	}{
		{"a body within the bound", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 200, `5 "hello" <nil>`},
		{"a chunked one", "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 200, `5 "abcde" <nil>`},
		{"a declared length past the bound", "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n", 413, defaultRefusal.String()},
		{"a chunked body past the bound", "POST /d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n" + strings.Repeat("x", 17) + "\r\n", 413, defaultRefusal.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFrom(t, "127.0.0.1", addr)
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			if status, answer := readAnswer(t, c); status != tc.status || answer != tc.answer {
				t.Errorf("answer %d %q, want %d %q", status, answer, tc.status, tc.answer)
			}
		})
	}
	if got := strings.Join(drain(handled), ","); got != "/a,/b" {
		t.Errorf("handlers ran for %q, want /a and /b", got)
	}

	timedOutBefore := testutil.ToFloat64(timedOutIn[phaseBody])
	c := dialFrom(t, "127.0.0.1", addr)
	if _, err := io.WriteString(c, "POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(c, 5*time.Second) {
		t.Fatal("a held body outlived the body phase's bound by seconds")
	}
	if got := testutil.ToFloat64(timedOutIn[phaseBody]) - timedOutBefore; got != 1 {
		t.Errorf("%v connections closed past the body phase's bound, want 1", got)
	}
	if got := drain(handled); len(got) != 0 {
		t.Errorf("a handler ran for a body never sent whole: %v", got)
	}
}

// String is the refusal as a client reads its body.
func (r Refusal) String() string { return string(r.Body) }

// TestHeldBodiesGiveWay: a client that fills the door with bodies it never finishes does not
// keep another out: at the bound one of them gives way to the newcomer, as a connection still
// sending its headers would. On a door that reads no body, such a request is refused at once.
func TestHeldBodiesGiveWay(t *testing.T) {
	limits := DefaultHTTPLimits
	limits.MaxConnections, limits.MaxBody = 4, 1<<10
	addr, d := serveLimited(t, limits, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	var held []net.Conn
	for range 4 {
		c := dialFrom(t, "127.0.0.1", addr)
		_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx")
		held = append(held, c)
	}
	waitPhase(t, d, phaseBody, 4)
	c := dialFrom(t, "127.0.0.2", addr)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if status, answer := readAnswer(t, c); status != 200 || answer != "ok" {
		t.Fatalf("the newcomer got %d %q", status, answer)
	}
	closed := 0
	for _, h := range held {
		if closedWithin(h, 100*time.Millisecond) {
			closed++
		}
	}
	if closed != 1 {
		t.Errorf("%d held bodies gave way to the newcomer, want 1", closed)
	}
}

// waitPhase waits until n of d's connections are in phase.
func waitPhase(t *testing.T, d *door, phase int64, n int) {
	t.Helper()
	in := func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		k := 0
		for c := range d.conns {
			if c.phase() == phase {
				k++
			}
		}
		return k
	}
	for deadline := time.Now().Add(5 * time.Second); in() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections in phase %d, want %d", in(), phase, n)
		}
	}
}

// TestProxiesHaveTheirOwn: clients that hold every connection they may, all being answered, do
// not keep a named proxy out: it is served at once from its own share, while a client's
// newcomer waits (its connection parked, the door accepting on); a proxy's own share is no use
// to a client.
func TestProxiesHaveTheirOwn(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	limits := DefaultHTTPLimits
	limits.ConnLimits = ConnLimits{MaxConnections: 4, ProxyConnections: 2, Proxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}}
	addr, d := serveLimited(t, limits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	for _, from := range []string{"127.0.0.1", "127.0.0.2"} {
		c := dialFrom(t, from, addr)
		if _, err := io.WriteString(c, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitPhase(t, d, phaseActive, 2)
	waiting := dialFrom(t, "127.0.0.4", addr)
	if _, err := io.WriteString(waiting, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		c := dialFrom(t, "127.0.0.3", addr)
		if body, err := roundTrip(c, bufio.NewReader(c)); err != nil || body != "ok" {
			t.Fatalf("the proxy's connection %d, with clients holding the rest: %q, %v", i, body, err)
		}
	}
	_ = waiting.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := waiting.Read(make([]byte, 1)); n != 0 || err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a client's newcomer was served from the proxies' share (%d bytes, %v)", n, err)
	}
	if got := d.waiting.Load(); got != 1 {
		t.Errorf("%d connections waiting, want the client's newcomer", got)
	}
}

// TestCallsWithoutAMessageEnd: a call whose headers came without its message ends at the first
// message's bound, well before the call's own, freeing its place; a Check sent whole is
// answered.
func TestCallsWithoutAMessageEnd(t *testing.T) {
	limits := DefaultGRPCLimits
	limits.FirstMessage, limits.CallTimeout = 300*time.Millisecond, time.Minute
	addr := serve(t, limits)
	conn := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := testutil.ToFloat64(grpcRefused.WithLabelValues("first_message"))
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, authv3.Authorization_Check_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = stream.RecvMsg(&authv3.CheckResponse{})
	took := time.Since(start)
	if status.Code(err) != codes.Canceled || took > 20*time.Second {
		t.Fatalf("a call without its message ended after %v with %v, want Canceled at the first message's bound", took, err)
	}
	if got := testutil.ToFloat64(grpcRefused.WithLabelValues("first_message")) - before; got != 1 {
		t.Errorf("%v calls counted as ended for their first message, want 1", got)
	}
	if _, err := authv3.NewAuthorizationClient(conn).Check(ctx, &authv3.CheckRequest{}); err != nil {
		t.Fatalf("a Check sent whole: %v", err)
	}
}

// TestBeforeBody: a door's BeforeBody answers from the headers alone, without waiting for a
// body its client holds back, and no handler runs; a request it lets through is read whole.
func TestBeforeBody(t *testing.T) {
	limits := DefaultHTTPLimits
	limits.MaxBody = 1 << 10
	limits.BeforeBody = func(r *http.Request) *Refusal {
		if r.Header.Get("X-Signature") == "" {
			return &Refusal{Status: http.StatusUnauthorized, Body: []byte("unsigned")}
		}
		return nil
	}
	handled := make(chan string, 10)
	addr, _ := serveLimited(t, limits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		handled <- string(body)
		_, _ = io.WriteString(w, "ok")
	}))
	c := dialFrom(t, "127.0.0.1", addr)
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if status, answer := readAnswer(t, c); status != 401 || answer != "unsigned" {
		t.Errorf("an unsigned request with a body never sent: %d %q, want 401 at once", status, answer)
	}
	c = dialFrom(t, "127.0.0.1", addr)
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nX-Signature: s\r\nContent-Length: 4\r\n\r\nbody"); err != nil {
		t.Fatal(err)
	}
	if status, answer := readAnswer(t, c); status != 200 || answer != "ok" {
		t.Errorf("a signed request: %d %q", status, answer)
	}
	if got := strings.Join(drain(handled), ","); got != "body" {
		t.Errorf("handlers ran for %q, want the signed request's body only", got)
	}
}
