//go:build !unit

package fault

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// heldConnections is the scale of issue 29's attack 3: connections any pod that reaches the
// forward-auth port can open and hold, sending a request line and never the rest.
const heldConnections = 8000

// TestForwardAuthBoundsHeldConnections runs bin/switchboard server with the forward-auth
// listener in a memory cgroup limited to the chart's 256 MiB, and holds 8,000 connections to it
// from 127.0.0.1, with no key, while a gateway at 127.0.0.2 checks a valid key every 100 ms.
// The server's open files stay within the listener's bound (plus what it opens for itself), its
// memory under the limit, and every one of the gateway's checks is allowed within a second.
func TestForwardAuthBoundsHeldConnections(t *testing.T) {
	cg := newMemCgroup(t, chartMemoryLimit)
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", kc, "--leader-elect=false")
	key := issue(t, env.Namespace(t, "gateway"), "gateway")

	api, authz, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	server := startInCgroup(t, cg, "server", kc, []string{fmt.Sprintf("SWITCHBOARD_MEMORY_LIMIT=%d", chartMemoryLimit)},
		"server", "--listen="+api, "--authz-http-listen="+authz, "--metrics-bind-address="+metrics, "--metrics-secure=false",
		"--health-probe-bind-address=", "--system-namespace="+systemNamespace, "--shutdown-delay=0s")
	ctx := ctxFor(t, 5*time.Minute)

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	gateway := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	check := func() error {
		req, err := http.NewRequest(http.MethodGet, "http://"+authz+"/authz/connections", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := gateway.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	testenv.Eventually(t, 2*time.Minute, "the gateway's key allowed", check)
	mem := watchMemory(ctx, server.Pid(), cg, "http://"+metrics+"/metrics")
	time.Sleep(time.Second)
	baseline := mem.snapshot()
	filesBefore := openFiles(server.Pid())

	attackCtx, stopAttack := context.WithTimeout(ctx, 10*time.Second)
	defer stopAttack()
	var slow []string
	var checks, peakFiles, dialed int
	var wg sync.WaitGroup
	wg.Go(func() {
		checks, slow = sampleClient(attackCtx, func() error {
			err := check()
			peakFiles = max(peakFiles, openFiles(server.Pid()))
			return err
		})
	})
	var held []net.Conn
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, Timeout: time.Second}
	for range heldConnections {
		if attackCtx.Err() != nil {
			break
		}
		c, err := attacker.DialContext(attackCtx, "tcp", authz)
		if err != nil {
			continue
		}
		dialed++
		_, _ = c.Write([]byte("GET /authz/connections HTTP/1.1\r\n"))
		held = append(held, c)
	}
	wg.Wait()
	during := mem.snapshot()
	mem.stop()
	for _, c := range held {
		_ = c.Close()
	}
	oom := cg.oomControl(t)

	t.Logf("memory before the attack: %s; peak during it: %s; open files %d before, %d at most during it; %d connections opened, the gateway's checks: %d, slow or failed: %d",
		baseline, during, filesBefore, peakFiles, dialed, checks, len(slow))
	if server.Exited() {
		t.Fatalf("the server died during the attack: %v", server.Err())
	}
	if oom["oom_kill"] != 0 {
		t.Errorf("the kernel's OOM killer acted in the server's cgroup: %v", oom)
	}
	if sum := during.cgroup + during.tcp; sum >= chartMemoryLimit {
		t.Errorf("the server's memory and its sockets' buffers peaked at %.1f MiB together (%s)", mib(sum), during)
	}
	// 64 connections of the attacker's address, the gateway's own, and what the server holds
	// for itself (the API server's connections, the listeners, epoll).
	if peakFiles > filesBefore+64+16 {
		t.Errorf("the server held %d open files during the attack (%d before): the attacker's connections are not bounded", peakFiles, filesBefore)
	}
	if len(slow) > 0 {
		t.Errorf("%d of the gateway's %d checks were not allowed within a second: %s", len(slow), checks, strings.Join(slow, "; "))
	}
	if checks < 20 {
		t.Errorf("the gateway checked only %d times in 10 s", checks)
	}
	if dialed < heldConnections/2 {
		t.Errorf("only %d connections were opened: the attack did not happen as described", dialed)
	}
}

// openFiles counts the file descriptors process pid holds; 0 once it is gone.
func openFiles(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(entries)
}
