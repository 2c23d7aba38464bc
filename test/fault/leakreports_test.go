//go:build !unit

package fault

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// The scale of issue 39's attack 3: unsigned and badly signed requests at 20 a second from
// each of four addresses, and connections holding bodies of the largest size read from three
// more (20 tried each; the door keeps its share per address, 8, and bounds their body phase).
const (
	floodAddresses      = 4
	floodPerSecond      = 20
	heldBodyAddresses   = 3
	heldBodiesPerClient = 20
	leakBodyBound       = 256 << 10
)

// fakeGitHub plays GitHub for the leak reports listener: its REST API (an alert's secret and
// locations, the organization's list of open alerts) and the keys of its partner program. It
// counts the REST requests.
type fakeGitHub struct {
	srv    *httptest.Server
	signer *ecdsa.PrivateKey
	token  string
	leaked string // the secret of alert 1; every other alert's is a key never issued
	rest   atomic.Int64
}

func newFakeGitHub(t *testing.T, token, leaked string) *fakeGitHub {
	t.Helper()
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGitHub{signer: signer, token: token, leaked: leaked}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/keys" {
		der, _ := x509.MarshalPKIXPublicKey(&g.signer.PublicKey)
		_ = json.NewEncoder(w).Encode(map[string]any{"public_keys": []map[string]any{
			{"key_identifier": "k1", "key": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), "is_current": true}}})
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/orgs/") {
		g.rest.Add(1) // an alert's requests; the catch-up's listing is not counted
	}
	if r.Header.Get("Authorization") != "Bearer "+g.token {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/orgs/"):
		_, _ = io.WriteString(w, "[]") // the catch-up's listing: nothing was missed
	case strings.HasSuffix(r.URL.Path, "/locations"):
		_, _ = io.WriteString(w, "[]")
	default:
		n, _ := strconv.Atoi(r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
		secret := g.leaked
		if n != 1 {
			var err error
			if secret, err = apikey.Generate(apikey.DefaultPrefix); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"number": n, "state": "open", "secret_type": "switchboard_api_key", "secret": secret,
			"html_url": fmt.Sprintf("https://github.com/acme/app/security/secret-scanning/%d", n)})
	}
}

// alert is GitHub's signed delivery of alert n.
func (g *fakeGitHub) alert(url string, secret []byte, n int) (*http.Request, error) {
	body := fmt.Appendf(nil, `{"action":"created","alert":{"number":%d},"repository":{"full_name":"acme/app","html_url":"https://github.com/acme/app"},`+
		`"organization":{"login":"acme"},"sender":{"login":"octocat"}}`, n)
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, url+"/github/alerts", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "secret_scanning_alert")
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("delivery-%d", n))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	return req, nil
}

// partner is a partner program request, signed with GitHub's key, of a key never issued.
func (g *fakeGitHub) partner(url string) (*http.Request, error) {
	token, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal([]map[string]string{{"token": token, "type": "switchboard_api_key", "url": "https://github.com/acme/app/blob/0abc/.env", "source": "content"}})
	digest := sha256.Sum256(body)
	sig, err := ecdsa.SignASN1(rand.Reader, g.signer, digest[:])
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url+"/github/secret-scanning", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Github-Public-Key-Identifier", "k1")
	req.Header.Set("Github-Public-Key-Signature", base64.StdEncoding.EncodeToString(sig))
	return req, nil
}

// TestLeakReceiverHearsGitHubUnderFlood runs bin/switchboard server with the leak reports
// listener (an organization's webhook and the partner program) in a memory cgroup limited to
// the chart's 256 MiB. Four addresses (127.0.0.3–6) send requests without a signature, with a
// forged one, or with a garbled one, at 20 a second each, and three more (127.0.0.7–9) try to
// hold 20 connections each, sending a well-formed signature and then a largest body slowly. GitHub, at
// 127.0.0.2, delivers a signed report every 100 ms (an organization's alert, then a partner
// request, in turn): every one is answered 200 within a second, the alert of an issued key is
// recorded, the flood costs no request to GitHub's API, and the server stays under its limit;
// no reported token appears in any output.
func TestLeakReceiverHearsGitHubUnderFlood(t *testing.T) {
	scanAfter(t) // no reported token in any output: the server knows them by hash and hint
	cg := newMemCgroup(t, chartMemoryLimit)
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", kc, "--leader-elect=false")
	leaked := issue(t, env.Namespace(t, "leak-flood"), "leaked")

	webhookSecret, apiToken := []byte(hex.EncodeToString([]byte("the organization's webhook secret"))), "github_pat_fault"
	github := newFakeGitHub(t, apiToken, leaked)
	dir := t.TempDir()
	for name, content := range map[string][]byte{"webhook-secret": webhookSecret, "api-token": []byte(apiToken)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	leaks, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t)
	config := filepath.Join(dir, "server.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `apiVersion: config.switchboard.dev/v1alpha1
kind: ServerConfiguration
leakReports:
  listen: %q
  partner:
    enabled: true
    publicKeysURL: %s/keys
  organizationAlerts:
    webhookSecretFile: %s
    apiTokenFile: %s
    apiBaseURL: %s
    organization: acme
`, leaks, github.srv.URL, filepath.Join(dir, "webhook-secret"), filepath.Join(dir, "api-token"), github.srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	server := startInCgroup(t, cg, "server", kc, []string{fmt.Sprintf("SWITCHBOARD_MEMORY_LIMIT=%d", chartMemoryLimit)},
		"server", "--config="+config, "--listen="+testenv.FreeAddr(t), "--metrics-bind-address="+metrics, "--metrics-secure=false",
		"--health-probe-bind-address=", "--system-namespace="+systemNamespace, "--shutdown-delay=0s")
	ctx := ctxFor(t, 5*time.Minute)
	url := "http://" + leaks

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	gh := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	var sent, alertsSent atomic.Int64
	var mu sync.Mutex
	answers := map[string]int{}
	deliver := func() error {
		n := int(sent.Add(1)) + 1 // alerts 2, 3, …: keys never issued
		var req *http.Request
		var err error
		if n%2 == 0 {
			alertsSent.Add(1)
			req, err = github.alert(url, webhookSecret, n)
		} else {
			req, err = github.partner(url)
		}
		if err != nil {
			return err
		}
		resp, err := gh.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("false_positive")) {
			return fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(body))
		}
		return nil
	}
	testenv.Eventually(t, 2*time.Minute, "GitHub's deliveries answered", deliver)
	mem := watchMemory(ctx, server.Pid(), cg, "http://"+metrics+"/metrics")
	time.Sleep(time.Second)
	baseline := mem.snapshot()
	restBefore, alertsBefore := github.rest.Load(), alertsSent.Load()

	attackCtx, stopAttack := context.WithTimeout(ctx, 15*time.Second)
	defer stopAttack()
	var attackers sync.WaitGroup
	var attempted, flooded, held atomic.Int64
	for i := range floodAddresses {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(3+i))}}).DialContext}}
		attackers.Go(func() {
			tick := time.NewTicker(time.Second / floodPerSecond)
			defer tick.Stop()
			for k := 0; ; k++ {
				select {
				case <-attackCtx.Done():
					return
				case <-tick.C:
				}
				req := floodRequest(url, k)
				attempted.Add(1)
				// Past the door's share of connections per address (each refused one lingers
				// half-closed a moment), the next is closed unanswered: a refusal too.
				resp, err := c.Do(req.WithContext(attackCtx))
				if err != nil {
					continue
				}
				_ = resp.Body.Close()
				flooded.Add(1)
				mu.Lock()
				answers[strconv.Itoa(resp.StatusCode)]++
				mu.Unlock()
			}
		})
	}
	for i := range heldBodyAddresses * heldBodiesPerClient {
		attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(7+i%heldBodyAddresses))}, Timeout: time.Second}
		attackers.Go(func() {
			for attackCtx.Err() == nil {
				holdBody(attackCtx, attacker, leaks, &held)
				time.Sleep(100 * time.Millisecond) // dial again, as a patient attacker does
			}
		})
	}
	checks, slow := sampleClient(attackCtx, deliver)
	attackers.Wait()
	during := mem.snapshot()
	mem.stop()
	oom := cg.oomControl(t)

	// The alert of an issued key, delivered after the flood: recorded.
	req, err := github.alert(url, webhookSecret, 1)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := gh.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var lr switchboardv1alpha1.LeakReport
	recordErr := env.Client.Get(ctxFor(t, 10*time.Second), client.ObjectKey{Namespace: systemNamespace,
		Name: switchboardv1alpha1.LeakReportName(apikey.Sum(leaked).String())}, &lr)

	restDuring := github.rest.Load() - restBefore - 2 // alert 1's two requests
	alerts := alertsSent.Load() - alertsBefore
	t.Logf("memory before the flood: %s; peak during it: %s; flood requests sent: %d, answered: %d %v, bodies held: %d; GitHub's deliveries: %d, slow or failed: %d; REST requests: %d for %d alerts",
		baseline, during, attempted.Load(), flooded.Load(), answers, held.Load(), checks, len(slow), restDuring, alerts)
	if server.Exited() {
		t.Fatalf("the server died during the flood: %v", server.Err())
	}
	if oom["oom_kill"] != 0 {
		t.Errorf("the kernel's OOM killer acted in the server's cgroup: %v", oom)
	}
	if sum := during.cgroup + during.tcp; sum >= chartMemoryLimit {
		t.Errorf("the server's memory and its sockets' buffers peaked at %.1f MiB together (%s)", mib(sum), during)
	}
	if len(slow) > 0 {
		t.Errorf("%d of GitHub's %d deliveries were not answered 200 within a second: %s", len(slow), checks, strings.Join(slow, "; "))
	}
	if checks < 100 {
		t.Errorf("GitHub delivered only %d times in 15 s", checks)
	}
	if want := int64(floodAddresses*floodPerSecond*15) * 8 / 10; attempted.Load() < want {
		t.Errorf("only %d flood requests were sent, want at least %d: the flood did not happen as described", attempted.Load(), want)
	}
	if flooded.Load() < attempted.Load()/4 {
		t.Errorf("only %d of %d flood requests were answered: the flood did not reach the receiver", flooded.Load(), attempted.Load())
	}
	mu.Lock()
	for status, n := range answers {
		if status != "401" && status != "429" {
			t.Errorf("%d flood requests were answered %s, want only 401 and 429", n, status)
		}
	}
	if answers["429"] == 0 {
		t.Error("no flood request was limited (429)")
	}
	mu.Unlock()
	if held.Load() < heldBodyAddresses*heldBodiesPerClient/4 {
		t.Errorf("only %d bodies were held a second or more: the attack did not happen as described", held.Load())
	}
	if restDuring > 2*alerts {
		t.Errorf("GitHub's API was asked %d times for %d delivered alerts: the flood cost requests", restDuring, alerts)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"recorded"`)) || recordErr != nil || lr.Spec.Reference != "acme/app#1" {
		t.Errorf("the alert of an issued key: %d %s; its LeakReport: %v %+v", resp.StatusCode, body, recordErr, lr.Spec)
	}
}

// floodRequest is the k-th request of a flooding address: no signature, a forged one, a
// garbled one, in turn, with bodies up to the bound.
func floodRequest(url string, k int) *http.Request {
	body := bytes.Repeat([]byte("x"), 1<<10<<(k%8)) // 1 KiB to 128 KiB
	path := "/github/alerts"
	if k%2 == 1 {
		path = "/github/secret-scanning"
	}
	req, _ := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	switch k % 3 {
	case 1: // forged: well-formed, wrong
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("ab", 32))
		req.Header.Set("Github-Public-Key-Identifier", "k1")
		req.Header.Set("Github-Public-Key-Signature", "MAYCAQECAQE=") // SEQUENCE { 1, 1 }
	case 2: // garbled
		req.Header.Set("X-Hub-Signature-256", "sha1=0")
		req.Header.Set("Github-Public-Key-Signature", "not base64")
	}
	return req
}

// holdBody opens a connection that sends a well-formed signature and a body of the largest
// size read, 4 KiB of it at once and then a byte a second, until the server answers or closes
// it, or ctx ends; held counts the connections kept open a second or more.
func holdBody(ctx context.Context, d net.Dialer, addr string, held *atomic.Int64) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		time.Sleep(50 * time.Millisecond)
		return
	}
	defer func() { _ = c.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	head := fmt.Sprintf("POST /github/alerts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n",
		strings.Repeat("cd", 32), leakBodyBound)
	if _, err := io.WriteString(c, head+strings.Repeat("x", 4<<10)); err != nil {
		return
	}
	opened := time.Now()
	defer func() {
		if time.Since(opened) >= time.Second {
			held.Add(1)
		}
	}()
	for ctx.Err() == nil {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		var b [512]byte
		if _, err := c.Read(b[:]); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return // answered or closed
			}
		}
		if _, err := io.WriteString(c, "x"); err != nil {
			return
		}
	}
}
