//go:build !unit

package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// heldBodies is the scale of issue 29's attack 2 on /v1: connections that each send a request
// whose body never ends (or whose headers never do), held from several addresses so that they
// add up past the listener's bound of 1,024 while each stays within its share of 256.
const heldBodies = 1100

// TestAPIWithstandsHeldBodies runs bin/switchboard server in a memory cgroup limited to the
// chart's 256 MiB and attacks /v1 with 1,100 connections from five addresses (127.0.0.1 and
// 127.0.0.3–6), each sending `GET /v1/connections` with a chunked body that never ends or
// headers that never do, and dialling again whenever the server closes one. A client at
// 127.0.0.2, with a valid key and a new connection for each request, is answered 200 within a
// second every 100 ms while the attack runs; the server is not killed and stays under the limit.
func TestAPIWithstandsHeldBodies(t *testing.T) {
	cg := newMemCgroup(t, chartMemoryLimit)
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", kc, "--leader-elect=false")
	key := issue(t, env.Namespace(t, "held-bodies"), "client")

	api, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t)
	server := startInCgroup(t, cg, "server", kc, []string{fmt.Sprintf("SWITCHBOARD_MEMORY_LIMIT=%d", chartMemoryLimit)},
		"server", "--listen="+api, "--metrics-bind-address="+metrics, "--metrics-secure=false",
		"--health-probe-bind-address=", "--system-namespace="+systemNamespace, "--shutdown-delay=0s")
	ctx := ctxFor(t, 5*time.Minute)

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	list := func() error {
		req, err := http.NewRequest(http.MethodGet, "http://"+api+"/v1/connections", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	testenv.Eventually(t, 2*time.Minute, "the client's key answered", list)
	mem := watchMemory(ctx, server.Pid(), cg, "http://"+metrics+"/metrics")
	time.Sleep(time.Second)
	baseline := mem.snapshot()

	attackCtx, stopAttack := context.WithTimeout(ctx, 10*time.Second)
	defer stopAttack()
	var dials, refused atomic.Int64
	var attackers sync.WaitGroup
	addrs := []string{"127.0.0.1", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}
	for i := range heldBodies {
		attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addrs[i%len(addrs)])}, Timeout: time.Second}
		slowHeaders := i%2 == 1
		attackers.Go(func() {
			for attackCtx.Err() == nil {
				c, err := attacker.DialContext(attackCtx, "tcp", api)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				dials.Add(1)
				stop := context.AfterFunc(attackCtx, func() { _ = c.Close() })
				if slowHeaders {
					_, err = io.WriteString(c, "GET /v1/connections HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key[:20])
				} else {
					_, err = io.WriteString(c, "GET /v1/connections HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n")
				}
				// Trickle until the server closes the connection.
				for err == nil && attackCtx.Err() == nil {
					_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
					var b [512]byte
					n, rerr := c.Read(b[:])
					if strings.Contains(string(b[:n]), " 413 ") {
						refused.Add(1)
					}
					var ne net.Error
					if rerr != nil && (!errors.As(rerr, &ne) || !ne.Timeout()) {
						break
					}
					if slowHeaders {
						_, err = io.WriteString(c, "x")
					} else {
						_, err = io.WriteString(c, "1\r\nx\r\n")
					}
				}
				stop()
				_ = c.Close()
			}
		})
	}
	checks, slow := sampleClient(attackCtx, list)
	attackers.Wait()
	during := mem.snapshot()
	mem.stop()
	oom := cg.oomControl(t)

	t.Logf("memory before the attack: %s; peak during it: %s; %d attacking connections dialled, %d bodies refused (413); the client's requests: %d, slow or failed: %d",
		baseline, during, dials.Load(), refused.Load(), checks, len(slow))
	if server.Exited() {
		t.Fatalf("the server died during the attack: %v", server.Err())
	}
	if oom["oom_kill"] != 0 {
		t.Errorf("the kernel's OOM killer acted in the server's cgroup: %v", oom)
	}
	if sum := during.cgroup + during.tcp; sum >= chartMemoryLimit {
		t.Errorf("the server's memory and its sockets' buffers peaked at %.1f MiB together (%s)", mib(sum), during)
	}
	if len(slow) > 0 {
		t.Errorf("%d of the client's %d requests were not answered 200 within a second: %s", len(slow), checks, strings.Join(slow, "; "))
	}
	if checks < 9 { // one request every 1.1 s at worst
		t.Errorf("the client asked only %d times in 10 s", checks)
	}
	if dials.Load() < heldBodies {
		t.Errorf("only %d connections were dialled: the attack did not happen as described", dials.Load())
	}
	if refused.Load() == 0 {
		t.Error("no request with a body was answered 413 BODY_NOT_ALLOWED")
	}
}
