//go:build !unit

package fault

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// heldPerPort is how many connections the attacker holds to each port: more than any door's
// share of one client, and more than the probes' bound in all.
const heldPerPort = 400

// port is one listener a test process was told to open: the door it should be, and whether it
// speaks TLS or gRPC.
type port struct {
	door      string
	addr      string
	tls, grpc bool
}

// TestEveryListenerIsBounded runs the operator, the server and the panel with every listener
// each can open, finds every port each process listens on from /proc, and fails for a port
// that is no door of frontdoor.Doors (a listener built outside the front door). It then holds
// 400 connections to each port from four addresses, over HTTP and TLS in every phase a client
// can hold (headers that never end, a body that never comes, answers never read), over gRPC
// sending nothing: the process's open files grow by at most the door's share of four clients,
// and a client at 127.0.0.2 is still answered within a second.
func TestEveryListenerIsBounded(t *testing.T) {
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	free := func(door string, tls, grpc bool) port {
		return port{door: door, addr: testenv.FreeAddr(t), tls: tls, grpc: grpc}
	}

	opPorts := []port{free("metrics", true, false), free("probes", false, false), free("webhook", true, false), free("reveal", true, false)}
	// The webhook serves once its certificate is in a configuration; this one's rule matches
	// no resource, so the API server never calls it.
	webhookConfiguration := "fault-listeners"
	none := admissionregistrationv1.Ignore
	sideEffects := admissionregistrationv1.SideEffectClassNone
	url := "https://" + opPorts[2].addr + "/validate"
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfiguration},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "nothing.fault.switchboard.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"fault.switchboard.dev"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}}}},
			FailurePolicy: &none, SideEffects: &sideEffects, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := env.Client.Create(context.Background(), vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), vwc) })
	operator := startOperator(t, "operator", kc, "--leader-elect=false", "--metrics-bind-address="+opPorts[0].addr,
		"--health-probe-bind-address="+opPorts[1].addr, "--webhook-bind-address="+opPorts[2].addr, "--webhook-names=127.0.0.1",
		"--webhook-configuration="+webhookConfiguration, "--reveal-bind-address="+opPorts[3].addr, "--reveal-names=127.0.0.1")
	srvPorts := []port{free("api", false, false), free("forward-auth", false, false), free("ext-authz", false, true),
		free("panel", false, false), free("metrics", false, false), free("probes", false, false), free("leak-reports", false, false)}
	// The panel beside /v1 and the leak reports listener are sections of the server's
	// configuration file.
	serverConfig := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(serverConfig, []byte("apiVersion: config.switchboard.dev/v1alpha1\nkind: ServerConfiguration\npanel:\n  listen: \""+
		srvPorts[3].addr+"\"\nleakReports:\n  listen: \""+srvPorts[6].addr+"\"\n  partner:\n    enabled: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := start(t, "server", kc, "server", "--config="+serverConfig, "--system-namespace="+systemNamespace, "--shutdown-delay=0s",
		"--listen="+srvPorts[0].addr, "--authz-http-listen="+srvPorts[1].addr, "--authz-grpc-listen="+srvPorts[2].addr,
		"--metrics-bind-address="+srvPorts[4].addr, "--metrics-secure=false",
		"--health-probe-bind-address="+srvPorts[5].addr)
	panelPorts := []port{free("panel", false, false), free("probes", false, false)}
	panel := start(t, "panel", kc, "panel", "--listen="+panelPorts[0].addr, "--health-probe-bind-address="+panelPorts[1].addr, "--shutdown-delay=0s")

	for _, p := range []struct {
		name  string
		proc  *process
		ports []port
	}{{"operator", operator, opPorts}, {"server", server, srvPorts}, {"panel", panel, panelPorts}} {
		t.Run(p.name, func(t *testing.T) {
			want := map[int]port{}
			for _, pt := range p.ports {
				if _, ok := frontdoor.DoorNamed(pt.door); !ok {
					t.Fatalf("the test names %q, no door of frontdoor.Doors", pt.door)
				}
				_, ps, _ := net.SplitHostPort(pt.addr)
				n, _ := strconv.Atoi(ps)
				want[n] = pt
			}
			var listening []int
			testenv.Eventually(t, 2*time.Minute, p.name+" listening on every port it was given", func() error {
				if p.proc.Exited() {
					t.Fatalf("%s exited: %v", p.name, p.proc.Err())
				}
				listening = listeningPorts(t, p.proc.Pid())
				for n, pt := range want {
					if !slices.Contains(listening, n) {
						return fmt.Errorf("%s (:%d) is not listening yet", pt.door, n)
					}
				}
				return nil
			})
			for _, n := range listening {
				if _, ok := want[n]; !ok {
					t.Errorf("%s listens on :%d, which is no listener of the table of limits (docs/security.md, frontdoor.Doors)", p.name, n)
				}
			}
			for _, pt := range p.ports {
				t.Run(pt.door, func(t *testing.T) { attackPort(t, p.proc, pt) })
			}
		})
	}
}

// heldFrom are the addresses the attacker holds its connections from.
var heldFrom = []string{"127.0.0.1", "127.0.0.3", "127.0.0.4", "127.0.0.5"}

// phaseOpenings hold an HTTP connection in each phase a client can: headers that never end, a
// body that never comes, and answers never read (enough pipelined requests that their answers
// fill the socket buffers, so that the server's writes wait on the client).
var phaseOpenings = []string{
	"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx",
	strings.Repeat("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 2000),
}

// attackPort holds heldPerPort connections to pt from four addresses (heldFrom), an HTTP one in
// each phase by turns (over TLS too), a gRPC one sending nothing, then checks the process's
// open files and that a client at 127.0.0.2 is answered.
func attackPort(t *testing.T, p *process, pt port) {
	door, _ := frontdoor.DoorNamed(pt.door)
	share, all := 0, 0
	switch {
	case door.HTTP != nil:
		share, all = door.HTTP.MaxConnectionsPerClient, door.HTTP.MaxConnections
	case door.GRPC != nil:
		share, all = door.GRPC.MaxConnectionsPerClient, door.GRPC.MaxConnections
	}
	// Served before the attack, and the process's files settled (the last attack's closed).
	testenv.Eventually(t, time.Minute, pt.door+" answering", func() error { return answered(pt) })
	filesBefore := settledFiles(p.Pid())
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for i := range heldPerPort {
		attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(heldFrom[i%len(heldFrom)])}, Timeout: time.Second}
		c, err := attacker.Dial("tcp", pt.addr)
		if err != nil {
			continue
		}
		held = append(held, c)
		if pt.grpc {
			continue
		}
		if pt.tls {
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the attacker trusts anything
			_ = tc.SetDeadline(time.Now().Add(time.Second))
			if tc.Handshake() != nil {
				continue // closed past its client's share
			}
			_ = tc.SetDeadline(time.Time{})
			c = tc
		}
		go func() { _, _ = io.WriteString(c, phaseOpenings[(i/len(heldFrom))%len(phaseOpenings)]) }()
	}
	time.Sleep(500 * time.Millisecond) // the process accepts (and closes past the share)
	peak := openFiles(p.Pid())
	start := time.Now()
	err := answered(pt)
	took := time.Since(start)
	t.Logf("%s: %d connections held from %d addresses; the process's open files %d before, %d during; another client answered after %v (%v)",
		pt.addr, len(held), len(heldFrom), filesBefore, peak, took.Round(time.Millisecond), err)
	if len(held) < heldPerPort/2 {
		t.Errorf("only %d connections were opened: the attack did not happen as described", len(held))
	}
	// The attackers' shares, the other client's connection, and what the process opens meanwhile.
	if bound := min(share*len(heldFrom), all); peak > filesBefore+bound+16 {
		t.Errorf("the process held %d open files during the attack (%d before; the door's share of %d clients is %d): the attackers' connections are not bounded",
			peak, filesBefore, len(heldFrom), bound)
	}
	if err != nil || took > time.Second {
		t.Errorf("a client at another address was not answered within a second during the attack (%v): %v", took, err)
	}
}

// settledFiles is how many files process pid holds once that number stops changing (within 5 s).
func settledFiles(pid int) int {
	n := openFiles(pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		m := openFiles(pid)
		if m == n {
			break
		}
		n = m
	}
	return n
}

// answered sends one request to pt from 127.0.0.2 and says whether it got an answer (any).
func answered(pt port) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	if pt.grpc {
		conn, err := grpc.NewClient(pt.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	c, err := d.DialContext(ctx, "tcp", pt.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	if pt.tls {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // any answer will do: the test checks it is served
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
	}
	if _, err := fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// listeningPorts are the TCP ports process pid listens on: the LISTEN sockets of
// /proc/net/tcp{,6} whose inodes are among its file descriptors.
func listeningPorts(t *testing.T, pid int) []int {
	t.Helper()
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, file := range []string{"tcp", "tcp6"} {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			local := f[1]
			n, err := strconv.ParseInt(local[strings.LastIndex(local, ":")+1:], 16, 32)
			if err == nil && !slices.Contains(ports, int(n)) {
				ports = append(ports, int(n))
			}
		}
	}
	return ports
}
