//go:build !unit

package fault

import (
	"context"
	"crypto/tls"
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

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator/keyadmission"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// The attacks of issue 39 on the doors other than /v1, at the scale they were reproduced: no
// key, a few client addresses from 127.0.0.3 up, against the real bin/switchboard in a memory
// cgroup of the chart's 256 MiB, while a valid caller at 127.0.0.2 samples every 100 ms.

// attackers are the client addresses the attacks come from: eight of them.
var attackers = []string{"127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7", "127.0.0.8", "127.0.0.9", "127.0.0.10"}

// Openings of a request that never ends: its headers, or its body (declared or chunked).
const (
	heldBody    = "GET /anything HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
	heldChunks  = "POST /anything HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n"
	heldHeaders = "GET /anything HTTP/1.1\r\nHost: x\r\nX-Slow: "
)

// held counts what an attack of held connections did.
type held struct {
	dials, answered atomic.Int64
}

// hold keeps perAddr connections to addr from each address of from, each sending opening (over
// TLS when tlsConf is set) and then nothing, dialling again a second after the server closes
// one (a flood of new connections is another attack, which this one is not), until ctx is done.
func hold(ctx context.Context, wg *sync.WaitGroup, addr string, from []string, perAddr int, tlsConf *tls.Config, opening string) *held {
	h := &held{}
	for _, a := range from {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(a)}, Timeout: time.Second}
		for range perAddr {
			wg.Go(func() {
				for ctx.Err() == nil {
					c, err := d.DialContext(ctx, "tcp", addr)
					if err != nil {
						time.Sleep(time.Second)
						continue
					}
					h.dials.Add(1)
					stop := context.AfterFunc(ctx, func() { _ = c.Close() })
					if tlsConf != nil {
						tc := tls.Client(c, tlsConf)
						if tc.HandshakeContext(ctx) != nil {
							stop()
							_ = c.Close()
							time.Sleep(time.Second)
							continue
						}
						c = tc
					}
					if _, err := io.WriteString(c, opening); err == nil {
						// Read whatever comes until the server closes the connection.
						if n, _ := io.Copy(io.Discard, c); n > 0 {
							h.answered.Add(1)
						}
					}
					stop()
					_ = c.Close()
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			})
		}
	}
	return h
}

// TestProbesAnsweredUnderAttack: eight addresses hold ten requests each on the server's probe
// listener whose body never comes (issue 39, attack 1), and ten each whose headers never end;
// a kubelet-like probe from another address (a new connection, 1 s timeout) is answered at
// least 29 times in 30.
func TestProbesAnsweredUnderAttack(t *testing.T) {
	cg := newMemCgroup(t, chartMemoryLimit)
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	api, probes := testenv.FreeAddr(t), testenv.FreeAddr(t)
	server := startInCgroup(t, cg, "server", kc, []string{fmt.Sprintf("SWITCHBOARD_MEMORY_LIMIT=%d", chartMemoryLimit)},
		"server", "--listen="+api, "--metrics-bind-address=", "--health-probe-bind-address="+probes,
		"--system-namespace="+systemNamespace, "--shutdown-delay=0s")
	ctx := ctxFor(t, 5*time.Minute)

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	kubelet := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	probe := func() error {
		resp, err := kubelet.Get("http://" + probes + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	testenv.Eventually(t, 2*time.Minute, "the server ready", probe)

	attackCtx, stopAttack := context.WithCancel(ctx)
	var wg sync.WaitGroup
	bodies := hold(attackCtx, &wg, probes, attackers, 10, nil, heldBody)
	headers := hold(attackCtx, &wg, probes, attackers, 10, nil, heldHeaders)
	time.Sleep(time.Second) // the attack in place
	var failed []string
	for i := range 30 {
		start := time.Now()
		if err := probe(); err != nil {
			failed = append(failed, fmt.Sprintf("probe %d after %v: %v", i, time.Since(start).Round(time.Millisecond), err))
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopAttack()
	wg.Wait()
	t.Logf("held bodies: %d connections dialled, %d answered; held headers: %d dialled; probes failed: %d of 30",
		bodies.dials.Load(), bodies.answered.Load(), headers.dials.Load(), len(failed))
	if server.Exited() {
		t.Fatalf("the server died during the attack: %v", server.Err())
	}
	if len(failed) > 1 {
		t.Errorf("%d of 30 probes failed: %s", len(failed), strings.Join(failed, "; "))
	}
	if bodies.dials.Load() < int64(len(attackers)*10) || headers.dials.Load() < int64(len(attackers)*10) {
		t.Error("the attack did not happen as described")
	}
}

// TestGatewaysAnsweredUnderAttack: against forward-auth, four addresses hold 64 requests each
// whose body never comes and eight hold 750 each with a chunked body that never ends (issue 39,
// attack 1); against ext_authz, two addresses each hold two HTTP/2 connections of 64 Check
// streams that send their headers and never a message, opening new ones as the server ends
// them (attack 2). A gateway at 127.0.0.2, named nowhere, is answered within a second at every
// sample on both, and the server stays under its memory limit.
func TestGatewaysAnsweredUnderAttack(t *testing.T) {
	cg := newMemCgroup(t, chartMemoryLimit)
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", kc, "--leader-elect=false")
	key := issue(t, env.Namespace(t, "gateways"), "gateway")

	api, fwd, grpcAddr, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	server := startInCgroup(t, cg, "server", kc, []string{fmt.Sprintf("SWITCHBOARD_MEMORY_LIMIT=%d", chartMemoryLimit)},
		"server", "--listen="+api, "--authz-http-listen="+fwd, "--authz-grpc-listen="+grpcAddr, "--metrics-bind-address="+metrics,
		"--metrics-secure=false", "--health-probe-bind-address=", "--system-namespace="+systemNamespace, "--shutdown-delay=0s")
	ctx := ctxFor(t, 5*time.Minute)

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	gateway := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	forwardAuth := func() error {
		req, err := http.NewRequest(http.MethodGet, "http://"+fwd+"/authz/connections", nil)
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
	envoy := dialFrom(t, "127.0.0.2", grpcAddr)
	extAuthz := func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := authv3.NewAuthorizationClient(envoy).Check(ctx, checkRequest(key, nil))
		if err != nil {
			return err
		}
		if c := codes.Code(resp.GetStatus().GetCode()); c != codes.OK {
			return fmt.Errorf("denied: %s", c)
		}
		return nil
	}
	testenv.Eventually(t, 2*time.Minute, "the gateway's key allowed", func() error { return errors.Join(forwardAuth(), extAuthz()) })
	mem := watchMemory(ctx, server.Pid(), cg, "http://"+metrics+"/metrics")
	time.Sleep(time.Second)
	baseline := mem.snapshot()

	attackCtx, stopAttack := context.WithTimeout(ctx, 30*time.Second)
	defer stopAttack()
	var wg sync.WaitGroup
	bodies := hold(attackCtx, &wg, fwd, attackers[:4], 64, nil, heldBody)
	chunks := hold(attackCtx, &wg, fwd, attackers, 750, nil, heldChunks)
	var opened, ended atomic.Int64
	for _, from := range attackers[:2] {
		for range 2 {
			wg.Go(func() { holdIdleStreams(attackCtx, from, grpcAddr, 64, &opened, &ended) })
		}
	}
	var sampled sync.WaitGroup
	var fwdChecks, grpcChecks int
	var fwdSlow, grpcSlow []string
	sampled.Go(func() { fwdChecks, fwdSlow = sampleClient(attackCtx, forwardAuth) })
	sampled.Go(func() { grpcChecks, grpcSlow = sampleClient(attackCtx, extAuthz) })
	sampled.Wait()
	wg.Wait()
	during := mem.snapshot()
	mem.stop()
	oom := cg.oomControl(t)

	t.Logf("memory before: %s, peak during: %s; forward-auth: %d held bodies and %d held chunked bodies dialled, the gateway's checks %d, slow or failed %d; ext_authz: %d idle streams opened, %d ended by the server, the gateway's Checks %d, slow or failed %d",
		baseline, during, bodies.dials.Load(), chunks.dials.Load(), fwdChecks, len(fwdSlow), opened.Load(), ended.Load(), grpcChecks, len(grpcSlow))
	if server.Exited() {
		t.Fatalf("the server died during the attack: %v", server.Err())
	}
	if oom["oom_kill"] != 0 {
		t.Errorf("the kernel's OOM killer acted in the server's cgroup: %v", oom)
	}
	if sum := during.cgroup + during.tcp; sum >= chartMemoryLimit {
		t.Errorf("the server's memory and its sockets' buffers peaked at %.1f MiB together (%s)", mib(sum), during)
	}
	if len(fwdSlow) > 0 {
		t.Errorf("%d of the gateway's %d forward-auth checks were not allowed within a second: %s", len(fwdSlow), fwdChecks, strings.Join(fwdSlow, "; "))
	}
	if len(grpcSlow) > 0 {
		t.Errorf("%d of the gateway's %d ext_authz Checks were not allowed within a second: %s", len(grpcSlow), grpcChecks, strings.Join(grpcSlow, "; "))
	}
	if fwdChecks < 100 || grpcChecks < 100 {
		t.Errorf("the gateway checked only %d and %d times in 30 s", fwdChecks, grpcChecks)
	}
	if chunks.dials.Load() < 6000 || opened.Load() < 256 || ended.Load() == 0 {
		t.Error("the attack did not happen as described")
	}
}

// holdIdleStreams keeps streams Check streams open on an HTTP/2 connection from `from`, each
// sending its headers and never a message, opening a new one (20 ms apart at most) whenever the
// server ends one and a new connection whenever it closes this one, until ctx is done.
func holdIdleStreams(ctx context.Context, from, addr string, streams int, opened, ended *atomic.Int64) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Second}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		stop := context.AfterFunc(ctx, func() { _ = c.Close() })
		free := make(chan struct{}, streams)
		for range streams {
			free <- struct{}{}
		}
		h, err := startCheckStreams(c, addr, func(bool) {
			ended.Add(1)
			free <- struct{}{}
		})
		for err == nil {
			select {
			case <-h.closed:
				err = net.ErrClosed
				continue
			case <-free:
			}
			if err = h.open(); err == nil {
				opened.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		}
		stop()
		_ = c.Close()
	}
}

// TestWebhookAnsweredUnderAttack: eight addresses hold 20 TLS connections each on the
// operator's admission webhook, sending a review whose body never comes (issue 39, attack 1:
// one address used to fill it); meanwhile APIKeys with cron renewal windows, which the webhook
// must admit (failurePolicy Fail), are created every 500 ms through the real API server, and
// each is admitted.
func TestWebhookAnsweredUnderAttack(t *testing.T) {
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	webhook := testenv.FreeAddr(t)
	url := "https://" + webhook + keyadmission.Path
	vwc := keyadmission.Configuration("fault-webhook-attack", admissionregistrationv1.WebhookClientConfig{URL: &url})
	ctx := ctxFor(t, 5*time.Minute)
	if err := env.Client.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), vwc) })
	operator := startOperator(t, "operator", kc, "--leader-elect=false", "--webhook-bind-address="+webhook, "--webhook-names=127.0.0.1",
		"--webhook-configuration="+vwc.Name)
	ns := env.Namespace(t, "webhook-attack")
	n := 0
	create := func() error {
		n++
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cron-%d", n)},
			Spec: switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{
				Lifetime: &metav1.Duration{Duration: 720 * time.Hour}, RenewBefore: &metav1.Duration{Duration: 48 * time.Hour},
				RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{{Cron: "0 3 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, TimeZone: "UTC"}}}}}
		return env.Client.Create(ctx, ak)
	}
	testenv.Eventually(t, 2*time.Minute, "the webhook admitting a cron window", create)

	attackCtx, stopAttack := context.WithTimeout(ctx, 15*time.Second)
	defer stopAttack()
	var wg sync.WaitGroup
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the attacker trusts anything
	bodies := hold(attackCtx, &wg, webhook, attackers, 20, insecure, "POST "+keyadmission.Path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	time.Sleep(time.Second)
	var failed []string
	var created int
	var slowest time.Duration
	for attackCtx.Err() == nil {
		start := time.Now()
		err := create()
		took := time.Since(start)
		slowest = max(slowest, took)
		if err != nil {
			failed = append(failed, fmt.Sprintf("after %v: %v", took.Round(time.Millisecond), err))
		} else {
			created++
		}
		time.Sleep(500 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("held review bodies: %d connections dialled; APIKeys with cron windows admitted: %d, refused: %d, slowest admission %v",
		bodies.dials.Load(), created, len(failed), slowest.Round(time.Millisecond))
	if operator.Exited() {
		t.Fatalf("the operator died during the attack: %v", operator.Err())
	}
	if len(failed) > 0 {
		t.Errorf("%d writes refused while the webhook was attacked: %s", len(failed), strings.Join(failed, "; "))
	}
	if created < 10 || bodies.dials.Load() < int64(len(attackers)*20) {
		t.Errorf("%d APIKeys created, %d connections dialled: the attack did not happen as described", created, bodies.dials.Load())
	}
}
