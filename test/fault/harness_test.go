//go:build !unit

// Package fault is switchboard's fault and abuse suite: the real bin/switchboard processes
// against a real control plane, with the API server made unreachable, operators killed mid-work,
// and the /v1 server fed hostile input. Every case is bounded in time and stops what it starts.
// docs/reliability.md lists the cases and what each proves.
package fault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/local/proc"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

var (
	env *testenv.Env
	// switchboardBin is bin/switchboard built from this tree for the suite.
	switchboardBin string
)

const systemNamespace = "switchboard-system"

// binaryEnv, when set, names a bin/switchboard to run instead of building this tree's.
const binaryEnv = "SWITCHBOARD_FAULT_BINARY"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchboard-fault-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switchboardBin = filepath.Join(dir, "switchboard")
	if bin := os.Getenv(binaryEnv); bin != "" {
		// Another build, to measure it against the same attacks (docs/benchmarks.md compares
		// the server of main with this one this way).
		switchboardBin = bin
	} else {
		build := exec.Command("go", "build", "-o", switchboardBin, "./cmd/switchboard")
		build.Dir = testenv.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building bin/switchboard: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	testenv.Run(m, &env)
}

// proxy is a TCP proxy in front of the API server. Cutting it closes every connection and
// refuses new ones, which is what an API-server outage looks like to a client; TLS passes
// through untouched, so the clients' certificates keep working.
type proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	up    bool
	conns map[net.Conn]struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, up: true, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { _ = l.Close(); p.cut() })
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		up := p.up
		if up {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if !up {
			_ = c.Close()
			continue
		}
		go p.pipe(c)
	}
}

func (p *proxy) pipe(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[u] = struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
	_, _ = io.Copy(c, u)
	_ = c.Close()
}

// cut makes the API server unreachable until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
}

// kubeconfig writes an admin kubeconfig whose server is host:port (the proxy or the API server).
func kubeconfig(t *testing.T, cfg *rest.Config, hostPort string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, "https://"+hostPort, "", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiServerHostPort is the API server's address from the environment's config.
func apiServerHostPort(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(env.Config.Host)
	if err != nil || u.Host == "" {
		t.Fatalf("unexpected API server address %q: %v", env.Config.Host, err)
	}
	return u.Host
}

// process is a running bin/switchboard whose combined output is kept for the hygiene scan.
type process struct {
	*proc.Process
}

// start runs bin/switchboard with args and the kubeconfig; it is killed when the test ends.
func start(t *testing.T, name, kubeconfigPath string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(switchboardBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigPath)
	return startCmd(t, name, cmd)
}

// startCmd runs cmd (bin/switchboard, or a wrapper that execs it) with its output kept for the
// hygiene scan; it is killed when the test ends.
func startCmd(t *testing.T, name string, cmd *exec.Cmd) *process {
	t.Helper()
	out := &proc.Buffer{}
	p, err := proc.Start(cmd, proc.Options{Name: name, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		logs.add(name, out)
		if t.Failed() {
			t.Logf("--- %s output (last 4 KiB) ---\n%s", name, tail(out.String(), 4096))
		}
	})
	return &process{p}
}

// kill ends the process at once, as a crash or a node loss would.
func (p *process) kill() { _ = p.Kill() }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// logs keeps the output of every process of the run for the hygiene scan.
var logs = &outputs{}

type outputs struct {
	mu   sync.Mutex
	outs map[string][]*proc.Buffer
}

func (o *outputs) add(name string, b *proc.Buffer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.outs == nil {
		o.outs = map[string][]*proc.Buffer{}
	}
	o.outs[name] = append(o.outs[name], b)
}

// startServer runs `switchboard server` and returns its API and health base URLs.
func startServer(t *testing.T, kubeconfigPath string, extra ...string) (*process, string, string) {
	t.Helper()
	api, health := testenv.FreeAddr(t), testenv.FreeAddr(t)
	args := append([]string{"server", "--listen=" + api, "--metrics-bind-address=",
		"--health-probe-bind-address=" + health, "--system-namespace=" + systemNamespace, "--shutdown-delay=0s"}, extra...)
	p := start(t, "server", kubeconfigPath, args...)
	return p, "http://" + api, "http://" + health
}

// startOperator runs `switchboard operator`.
func startOperator(t *testing.T, name, kubeconfigPath string, extra ...string) *process {
	t.Helper()
	args := append([]string{"operator", "--system-namespace=" + systemNamespace, "--metrics-bind-address=",
		"--health-probe-bind-address=", "--kube-api-qps=500", "--kube-api-burst=1000"}, extra...)
	return start(t, name, kubeconfigPath, args...)
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// response is one /v1 answer, reduced to what the contract speaks of.
type response struct {
	status int
	code   string
	body   []byte
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

func call(url, authorization string) (response, error) {
	return callWith(httpClient, url, authorization)
}

// callWith is call through c.
func callWith(c *http.Client, url, authorization string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return response{}, err
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	r := response{status: resp.StatusCode, body: body}
	if i := bytes.Index(body, []byte(`"code":"`)); i >= 0 {
		rest := body[i+len(`"code":"`):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			r.code = string(rest[:j])
		}
	}
	return r, nil
}

// issue creates an APIKey and returns its key, claimed from the reveal Secret.
func issue(t *testing.T, ns, name string) string {
	t.Helper()
	return issueWith(t, ns, name, switchboardv1alpha1.APIKeySpec{})
}

// issueWith is issue of an APIKey with spec.
func issueWith(t *testing.T, ns, name string, spec switchboardv1alpha1.APIKeySpec) string {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := env.Client.Create(ctx, ak); err != nil {
		t.Fatal(err)
	}
	var key string
	testenv.Eventually(t, 60*time.Second, "issuing "+name, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ak), ak); err != nil {
			return err
		}
		if ak.Status.RevealSecretName == "" {
			return errors.New("no reveal Secret published yet")
		}
		got, err := keyclient.Claim(ctx, env.Client, ak)
		if err != nil {
			return err
		}
		key = got.Key
		issued.add(key)
		return nil
	})
	return key
}

func createConnections(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		c := &switchboardv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: switchboardv1alpha1.ConnectionSpec{Provider: "postgres"}}
		if err := env.Client.Create(ctxFor(t, 10*time.Second), c); err != nil {
			t.Fatal(err)
		}
	}
}

// revoke sets spec.revoked on an APIKey.
func revoke(t *testing.T, ns, name string) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	var ak switchboardv1alpha1.APIKey
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ak); err != nil {
		t.Fatal(err)
	}
	base := ak.DeepCopy()
	ak.Spec.Revoked = true
	if err := env.Client.Patch(ctx, &ak, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func ensureSystemNamespace(t *testing.T) {
	t.Helper()
	// The signing namespace too: the operator copies KeyWebhooks' signing secrets there, and the
	// webhook sender reads them there (the configuration's default for systemNamespace).
	for _, ns := range []string{systemNamespace, configv1alpha1.DefaultWebhookSigningNamespace(systemNamespace)} {
		if err := env.EnsureNamespace(ctxFor(t, 10*time.Second), ns); err != nil {
			t.Fatal(err)
		}
	}
}

// hashSecrets lists the hash Secrets of the APIKeys of namespace ns.
func hashSecrets(ctx context.Context, ns string) ([]corev1.Secret, error) {
	var list corev1.SecretList
	err := env.Client.List(ctx, &list, client.InNamespace(systemNamespace), client.MatchingLabels{
		keysecret.LabelComponent: keysecret.ComponentHash, keysecret.LabelAPIKeyNamespace: ns})
	return list.Items, err
}

// sampleClient calls check every 100 ms until ctx is done, as issue 29's valid client during an
// attack, and returns how many calls it made and those that failed or took over a second.
func sampleClient(ctx context.Context, check func() error) (calls int, slow []string) {
	for ctx.Err() == nil {
		start := time.Now()
		err := check()
		calls++
		if took := time.Since(start); err != nil || took > time.Second {
			slow = append(slow, fmt.Sprintf("%s after %s: %v", start.Format("15:04:05.000"), took.Round(time.Millisecond), err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return calls, slow
}
