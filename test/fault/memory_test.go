//go:build !unit

package fault

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// The attack of issue 18, item 1, at the scale it was reproduced: Connections of 50 metadata
// values of 500 `<` (164 KB of /v1 JSON each while `<` was escaped; 40 of them made the 6.5 MiB
// lists the issue measured), 64 keys with distinct selectors, and slow readers who never read
// their responses, against a server under the chart's memory limit.
const (
	chartMemoryLimit = 256 << 20
	fatConnections   = 40
	selectorKeys     = 64
	pagedReaders     = 40 // unread ?limit=1000 responses from one key, per wave
)

// TestHostileTenantCannotExhaustServerMemory runs bin/switchboard server in a memory cgroup
// limited to the chart's 256 MiB, with the chart's $SWITCHBOARD_MEMORY_LIMIT, and performs the
// attack as a tenant with its namespace's edit role: fat Connections; 64 APIKeys whose distinct
// selectors each match all Connections but one, every one listed; then two waves of readers
// that never read — 40 paged responses of one key and one full list per selector key — with
// every Connection rewritten between the waves, so that the second wave is sent another
// snapshot. Meanwhile another tenant's key is asked every 100 ms. The server must not be
// killed, its memory and its sockets' kernel buffers together (what cgroup v2 charges a pod)
// must stay under the limit, and the other tenant must get 200 every time. Peaks are logged.
func TestHostileTenantCannotExhaustServerMemory(t *testing.T) {
	scanAfter(t)
	cg := newMemCgroup(t, chartMemoryLimit)
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", kc, "--leader-elect=false")

	// The other tenant: one Connection, one key.
	other := env.Namespace(t, "bystander")
	createConnections(t, other, "crm")
	otherKey := issue(t, other, "bystander")

	// The attacker, as a tenant with edit.
	ns := env.Namespace(t, "hostile")
	tenant := tenantClient(t, ns)
	ctx := ctxFor(t, 10*time.Minute)
	for i := range fatConnections {
		c := &switchboardv1alpha1.Connection{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fat-%02d", i), Labels: map[string]string{"n": fmt.Sprintf("c%02d", i)}},
			Spec:       switchboardv1alpha1.ConnectionSpec{Metadata: fatMetadata("<")},
		}
		if err := tenant.Create(ctx, c); err != nil {
			t.Fatalf("creating Connection %s as the tenant: %v", c.Name, err)
		}
	}
	keys := []*switchboardv1alpha1.APIKey{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}}}
	for i := range selectorKeys {
		keys = append(keys, &switchboardv1alpha1.APIKey{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sel-%02d", i)},
			Spec: switchboardv1alpha1.APIKeySpec{ConnectionSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "n", Operator: metav1.LabelSelectorOpNotIn, Values: []string{fmt.Sprintf("c%02d", i%fatConnections)}},
				{Key: fmt.Sprintf("absent-%02d", i), Operator: metav1.LabelSelectorOpDoesNotExist},
			}}},
		})
	}
	attackerKeys := issueAllAs(t, tenant, keys)

	api, health, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	args := []string{"server", "--listen=" + api, "--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + health,
		"--system-namespace=" + systemNamespace, "--shutdown-delay=0s"}
	if help, _ := exec.Command(switchboardBin, "server", "--help").CombinedOutput(); strings.Contains(string(help), "--metrics-secure") {
		args = append(args, "--metrics-secure=false") // the test reads the heap from plain-HTTP metrics (older builds have no flag)
	}
	server := startInCgroup(t, cg, "server", kc, []string{fmt.Sprintf("SWITCHBOARD_MEMORY_LIMIT=%d", chartMemoryLimit)}, args...)
	base := "http://" + api
	testenv.Eventually(t, 2*time.Minute, "the server listing every fat Connection", func() error {
		r, err := call(base+"/v1/connections", "Bearer "+attackerKeys[0])
		if err == nil && (r.status != 200 || strings.Count(string(r.body), `"id":"conn_`) != fatConnections) {
			err = fmt.Errorf("status %d, %d Connections", r.status, strings.Count(string(r.body), `"id":"conn_`))
		}
		return err
	})
	if r, err := call(base+"/v1/connections", "Bearer "+otherKey); err != nil || r.status != 200 {
		t.Fatalf("the other tenant before the attack: %d, %v", r.status, err)
	}

	mem := watchMemory(ctx, server.Pid(), cg, "http://"+metrics+"/metrics")
	time.Sleep(time.Second)
	baseline := mem.snapshot()
	bystander := watchBystander(ctx, base, otherKey)

	// 1. Every selector key lists its Connections, twice, eight at a time.
	var listed atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 2*selectorKeys; i += 8 {
				if r, err := call(base+"/v1/connections", "Bearer "+attackerKeys[1+i%selectorKeys]); err == nil && r.status == 200 {
					listed.Add(1)
				}
			}
		})
	}
	wg.Wait()

	// 2. Two waves of readers that never read, with every Connection rewritten in between.
	outcomes := map[string]int{}
	var held []net.Conn
	wave := func() {
		for range pagedReaders {
			c, status := unreadRequest(base, "/v1/connections?limit=1000", attackerKeys[0])
			outcomes[status]++
			if c != nil {
				held = append(held, c)
			}
		}
		for i := range selectorKeys {
			c, status := unreadRequest(base, "/v1/connections", attackerKeys[1+i])
			outcomes[status]++
			if c != nil {
				held = append(held, c)
			}
		}
	}
	wave()
	for i := range fatConnections {
		var c switchboardv1alpha1.Connection
		if err := tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("fat-%02d", i)}, &c); err != nil {
			t.Fatal(err)
		}
		c.Spec.Metadata = fatMetadata(">")
		if err := tenant.Update(ctx, &c); err != nil {
			t.Fatalf("rewriting Connection %s as the tenant: %v", c.Name, err)
		}
	}
	time.Sleep(2 * time.Second) // the rewrites reach the server's cache
	wave()
	time.Sleep(15 * time.Second) // held within the server's 30 s write timeout
	during := mem.snapshot()
	for _, c := range held {
		_ = c.Close()
	}
	time.Sleep(2 * time.Second)
	answers := bystander.stop()
	mem.stop()
	oom := cg.oomControl(t)

	t.Logf("listings by the 64 selector keys answered 200: %d of %d; unread requests by their status line: %v", listed.Load(), 2*selectorKeys, outcomes)
	t.Logf("memory before the attack: %s; peak during it: %s; cgroup failcnt %d, oom_control %v",
		baseline, during, cg.value(t, "memory.failcnt"), oom)
	t.Logf("the other tenant's answers during the attack: %v", answers)

	if server.Exited() {
		t.Errorf("the server died during the attack: %v", server.Err())
	}
	if oom["oom_kill"] != 0 || oom["under_oom"] != 0 {
		t.Errorf("the kernel's OOM killer acted in the server's cgroup: %v", oom)
	}
	// cgroup v2 charges a pod's socket buffers to its memory; v1 counts them apart.
	if sum := during.cgroup + during.tcp; sum >= chartMemoryLimit {
		t.Errorf("the server's memory and its sockets' buffers peaked at %.1f MiB together, the whole limit (%s)", mib(sum), during)
	}
	if answers["200"] < 100 || len(answers) != 1 {
		t.Errorf("the other tenant was not answered 200 throughout the attack: %v", answers)
	}
	if r, err := call(base+"/v1/connections", "Bearer "+attackerKeys[0]); err != nil || r.status != 200 {
		t.Errorf("after the attack the attacker's own key got %d, %v", r.status, err)
	}
	if baseline.heap == 0 {
		t.Error("the server's heap could not be read from its metrics: the measurement is incomplete")
	}
	if len(held) < pagedReaders {
		t.Errorf("only %d unread requests were held: the attack did not happen as described", len(held))
	}
}

// fatMetadata is 50 values of 500 times s.
func fatMetadata(s string) map[string]switchboardv1alpha1.MetadataValue {
	m := make(map[string]switchboardv1alpha1.MetadataValue, 50)
	for i := range 50 {
		m[fmt.Sprintf("k%02d", i)] = switchboardv1alpha1.MetadataValue(strings.Repeat(s, 500))
	}
	return m
}

// unreadRequest sends GET path with key on a connection whose receive buffer is as small as
// the kernel allows, reads the status line and nothing more, and returns the connection, open
// (nil when it could not connect) and the status ("error" when none came in 10 s).
func unreadRequest(base, path, key string) (net.Conn, string) {
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		_ = rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return nil, "error"
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, key); err != nil {
		_ = conn.Close()
		return nil, "error"
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil {
		return conn, "error"
	}
	if f := strings.Fields(line); len(f) >= 2 {
		return conn, f[1]
	}
	return conn, "error"
}
