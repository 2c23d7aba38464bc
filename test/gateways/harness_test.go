//go:build !unit

// Package gateways puts real gateways in front of switchboard's HTTP forward-auth listener
// (`switchboard server --authz-http-listen`): Caddy's forward_auth (built from source by
// `make caddy` into bin/) and Debian's NGINX auth_request (apt-get install nginx), each
// before a real upstream, on a real control plane with the real operator. Every decision is
// made by switchboard and observed as a client of the gateway sees it, and as the upstream
// sees it.
//
// The helpers of caddy_test.go and nginx_test.go live in this file; the package has no
// TestMain, so that each test file starts what it needs and other files share nothing with
// these but the package.
package gateways

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/local/proc"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// The forward-auth contract, as a gateway and its upstream see it.
const (
	headerKey     = "X-Switchboard-Key"
	headerKeyUID  = "X-Switchboard-Key-Uid"
	headerKeyHint = "X-Switchboard-Key-Hint"
	headerCode    = "X-Switchboard-Code"
	// headerUpstream marks an answer of the upstream, so that a 200 of the gateway or of
	// switchboard itself is never taken for the upstream's.
	headerUpstream = "X-Test-Upstream"
)

// The audiences of the gateways' two routes: /orders/… and /billing/….
const (
	audienceOrders  = "orders"
	audienceBilling = "billing"
)

// forwardAuthSystemNamespace holds the hash Secrets of each stack's control plane.
const forwardAuthSystemNamespace = "switchboard-system"

// forwardAuthStack is one control plane with the operator, `switchboard server` (the /v1 API
// and the forward-auth listener, as a real process with its real flags) and an upstream,
// ready for a gateway to be put in front.
type forwardAuthStack struct {
	env *testenv.Env
	// namespace holds the test's APIKeys.
	namespace string
	// authzAddr is the forward-auth listener (host:port), the gateway's auth backend.
	authzAddr string
	// unreadyAuthzAddr is the forward-auth listener of a second server that never becomes
	// ready: its identity may not list what it caches, so its cache never syncs.
	unreadyAuthzAddr string
	// apiURL is the server's /v1 base URL, to compare a key's fate there.
	apiURL   string
	upstream *echoUpstream
}

// Caddy and NGINX: where the tests find them.
const (
	// caddyEnv names the Caddy binary; the Makefile exports it.
	caddyEnv = "CADDY"
	// defaultCaddy is `make caddy`'s binary, relative to the repository root.
	defaultCaddy = "bin/caddy-v2.11.9"
	// nginxPath is Debian's NGINX.
	nginxPath = "/usr/sbin/nginx"
)

// caddyBinary is the Caddy to run, or a failure saying how to get it.
func caddyBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(caddyEnv)
	if bin == "" {
		bin = filepath.Join(testenv.RepoRoot(), defaultCaddy)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Caddy is missing (%v): run `make caddy` (it builds %s from hack/tools/caddy; `make test` does it), or set %s to a Caddy v2 binary with the standard modules", err, defaultCaddy, caddyEnv)
	}
	return bin
}

// nginxBinary is Debian's NGINX, or a failure saying how to get it.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(nginxPath); err != nil {
		t.Fatalf("NGINX is missing (%v): apt-get install -y nginx (.ci/run does it); the tests need its auth_request module, which Debian's package has", err)
	}
	return nginxPath
}

// startForwardAuthStack starts the control plane, the operator (in this process) and
// `switchboard server` (built from this tree) with its forward-auth listener on loopback,
// trusting loopback gateways' X-Forwarded-For, a second server that never becomes ready, and
// an upstream. The failure limiter is on, with a burst of failureBurst: each case speaks from
// its own client address (X-Forwarded-For through the gateway), so the failures of one do not
// count against another. Everything is stopped when the test ends.
func startForwardAuthStack(t *testing.T) *forwardAuthStack {
	t.Helper()
	bin := buildSwitchboard(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	ctx := testContext(t, 30*time.Second)
	if err := env.EnsureNamespace(ctx, forwardAuthSystemNamespace); err != nil {
		t.Fatal(err)
	}
	s := &forwardAuthStack{env: env, namespace: env.Namespace(t, "gateways")}

	// Not t's logger: the operator may still log after Run returns. Its last lines are
	// quoted when the test fails.
	var opLog proc.Tail
	opCtx, stopOperator := context.WithCancel(context.Background())
	opDone := make(chan error, 1)
	go func() {
		opDone <- operator.Run(opCtx, testenv.OperatorConfiguration(forwardAuthSystemNamespace), operator.Deps{
			RESTConfig: env.Config,
			// Each test of the package runs its own operator in this process.
			SkipControllerNameValidation: true,
			Logger:                       funcr.New(func(prefix, args string) { fmt.Fprintln(&opLog, prefix, args) }, funcr.Options{}),
		})
	}()
	t.Cleanup(func() {
		stopOperator()
		if err := <-opDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("operator.Run: %v", err)
		}
		if t.Failed() {
			t.Logf("the operator, last lines:\n%s", opLog.Lines(40))
		}
	})

	var health string
	s.authzAddr, s.apiURL, health = startServer(t, bin, "switchboard server", env.Config)
	waitHTTP(t, "switchboard server", "http://"+health+"/readyz")
	waitListening(t, "the forward-auth listener", s.authzAddr)

	// A ServiceAccount bound to nothing: discovery works, every list is refused.
	nobody := env.ServiceAccount(t, forwardAuthSystemNamespace, "nobody")
	s.unreadyAuthzAddr, _, _ = startServer(t, bin, "switchboard server (never ready)", nobody)
	waitListening(t, "the never-ready forward-auth listener", s.unreadyAuthzAddr)

	s.upstream = startEchoUpstream(t)
	return s
}

// startServer runs `switchboard server` as identity with the forward-auth listener on, and
// returns the listener's address, the /v1 URL and the health probes' address.
func startServer(t *testing.T, bin, name string, identity *rest.Config) (authz, apiURL, health string) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(identity, identity.Host, "", kubeconfig); err != nil {
		t.Fatal(err)
	}
	authz, api, health := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	cmd := exec.Command(bin, "server", //nolint:gosec // this tree's binary, with this helper's flags
		"--listen="+api,
		"--authz-http-listen="+authz,
		"--metrics-bind-address=",
		"--health-probe-bind-address="+health,
		"--system-namespace="+forwardAuthSystemNamespace,
		"--shutdown-delay=0s",
		"--trusted-proxies=127.0.0.1/32",
		"--auth-failure-rate=0.001",
		"--auth-failure-burst="+strconv.Itoa(failureBurst),
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	startProcess(t, name, cmd)
	return authz, "http://" + api, health
}

// gatewayRoute is one route of the gateways: requests under /<path>/ are checked by the
// forward-auth listener at authz for audience, then proxied to the upstream.
type gatewayRoute struct{ path, authz, audience string }

// routeUnready is the path of the route checked by the server that never becomes ready.
const routeUnready = "unready"

// routes are the gateways' routes: one per audience, and one checked by the never-ready server.
func (s *forwardAuthStack) routes() []gatewayRoute {
	return []gatewayRoute{
		{audienceOrders, s.authzAddr, audienceOrders},
		{audienceBilling, s.authzAddr, audienceBilling},
		{routeUnready, s.unreadyAuthzAddr, audienceOrders},
	}
}

// failureBurst is how many failed authentications a client address may make at once.
const failureBurst = 3

// buildSwitchboard builds cmd/switchboard from this tree into the test's temporary directory
// (not bin/switchboard, which `make build` owns).
func buildSwitchboard(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchboard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/switchboard")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building switchboard: %v\n%s", err, out)
	}
	return bin
}

// startProcess starts cmd as a child (its own process group, killed with the test binary),
// and stops it when the test ends, quoting the end of its output when the test failed or the
// child died early.
func startProcess(t *testing.T, name string, cmd *exec.Cmd) *proc.Process {
	t.Helper()
	p, err := proc.Start(cmd, proc.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Err(); err != nil {
			t.Errorf("%s stopped before the test ended: %v", name, err)
		} else if t.Failed() {
			t.Logf("%s, last lines:\n%s", name, p.Tail(40))
		}
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping %s: %v", name, err)
		}
	})
	return p
}

// waitHTTP waits until url answers 200.
func waitHTTP(t *testing.T, what, url string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, what+" ready", func() error {
		return proc.HTTPStatus(testContext(t, 5*time.Second), http.DefaultClient, url, http.StatusOK)
	})
}

// waitListening waits until addr accepts connections.
func waitListening(t *testing.T, what, addr string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what+" listening on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// portOf is the port of host:port.
func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// echoUpstream is the API behind the gateway: it answers every request 200 with what it was
// given, and counts the requests that reached it.
type echoUpstream struct {
	url  string
	hits atomic.Int64
}

// upstreamSaw is what the upstream received.
type upstreamSaw struct {
	Path          string `json:"path"`
	Authorization string `json:"authorization"`
	Key           string `json:"key"`
	KeyUID        string `json:"keyUid"`
	KeyHint       string `json:"keyHint"`
	// Code is an X-Switchboard-Code that reached the upstream (never, on an allowed request).
	Code string `json:"code"`
	// KeyValues counts the X-Switchboard-Key fields: one, the gateway's, whatever the client sent.
	KeyValues int `json:"keyValues"`
}

func startEchoUpstream(t *testing.T) *echoUpstream {
	t.Helper()
	u := &echoUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		saw := upstreamSaw{
			Path:          r.URL.Path,
			Authorization: r.Header.Get("Authorization"),
			Key:           r.Header.Get(headerKey),
			KeyUID:        r.Header.Get(headerKeyUID),
			KeyHint:       r.Header.Get(headerKeyHint),
			Code:          r.Header.Get(headerCode),
			KeyValues:     len(r.Header.Values(headerKey)),
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(headerUpstream, "1")
		_ = json.NewEncoder(w).Encode(saw)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// hostPort is the upstream's address, for the gateways' configurations.
func (u *echoUpstream) hostPort() string { return strings.TrimPrefix(u.url, "http://") }

// answer is one response, reduced to what the contract speaks of.
type answer struct {
	status int
	header http.Header
	body   []byte
	// code is the error code of a JSON error body ({"error":{"code":…}}), "" without one.
	code string
	// saw is the upstream's echo when the upstream answered.
	saw *upstreamSaw
}

func (a answer) String() string {
	return fmt.Sprintf("%d %s (X-Switchboard-Code %q) %s", a.status, a.code, a.header.Get(headerCode), strings.TrimSpace(string(a.body)))
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// request is one client request through a gateway (or to switchboard directly).
type request struct {
	// authorization is the Authorization field; "" sends none.
	authorization string
	// from, when set, is the client address the request claims through X-Forwarded-For,
	// which the gateways are configured to believe from the test (a trusted proxy's hop).
	from string
	// header are extra fields.
	header http.Header
}

func bearer(key string) string { return "Bearer " + key }

// do sends GET url and reads the answer.
func do(t *testing.T, url string, r request) answer {
	t.Helper()
	a, err := tryDo(url, r)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func tryDo(url string, r request) (answer, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return answer{}, err
	}
	for name, values := range r.header {
		req.Header[name] = values
	}
	if r.authorization != "" {
		req.Header.Set("Authorization", r.authorization)
	}
	if r.from != "" {
		req.Header.Set("X-Forwarded-For", r.from)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, fmt.Errorf("GET %s: reading the body: %w", url, err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: body}
	if resp.Header.Get(headerUpstream) != "" {
		a.saw = &upstreamSaw{}
		if err := json.Unmarshal(body, a.saw); err != nil {
			return a, fmt.Errorf("GET %s: the upstream's echo: %w", url, err)
		}
		return a, nil
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		a.code = e.Error.Code
	}
	return a, nil
}

// issueKey creates an APIKey with spec in the stack's namespace, waits for the operator to
// issue its key, claims it, and waits until the forward-auth listener knows it (any answer
// but an authentication failure, asked from its own client address directly). It returns the
// key and the APIKey as issued.
func (s *forwardAuthStack) issueKey(t *testing.T, name string, spec switchboardv1alpha1.APIKeySpec) (string, *switchboardv1alpha1.APIKey) {
	t.Helper()
	ctx := testContext(t, 90*time.Second)
	ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: name}, Spec: spec}
	if err := s.env.Client.Create(ctx, ak); err != nil {
		t.Fatalf("creating APIKey %s: %v", name, err)
	}
	var key string
	testenv.Eventually(t, 60*time.Second, "the operator to issue "+name, func() error {
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(ak), ak); err != nil {
			return err
		}
		if ak.Status.RevealSecretName == "" {
			return errors.New("no reveal Secret published yet")
		}
		got, err := keyclient.Claim(ctx, s.env.Client, ak)
		if err != nil {
			return err
		}
		key = got.Key
		return nil
	})
	s.waitKnown(t, key, audienceOf(spec))
	return key, ak
}

// audienceOf is an audience the key may be used for.
func audienceOf(spec switchboardv1alpha1.APIKeySpec) string {
	if len(spec.Audiences) > 0 {
		return string(spec.Audiences[0])
	}
	return audienceOrders
}

// waitKnown waits until the forward-auth listener authenticates key on audience: the server
// follows the API server through its informers, a moment after the operator. Its last answer,
// an allowed one for a key with a rate limit, has taken one request of the key's budget.
func (s *forwardAuthStack) waitKnown(t *testing.T, key, audience string) answer {
	t.Helper()
	var last answer
	testenv.Eventually(t, 30*time.Second, "the forward-auth listener to know the key", func() error {
		a, err := tryDo(s.authzURL(audience), request{authorization: bearer(key), from: "192.0.2.250"})
		if err != nil {
			return err
		}
		last = a
		// Unknown yet: 401, or 429 once the waiting address has used its failures.
		if a.code == "API_KEY_INVALID" || a.code == "RATE_LIMITED" {
			return fmt.Errorf("answered %s", a)
		}
		return nil
	})
	return last
}

// authzURL is the forward-auth endpoint of audience, as a gateway calls it.
func (s *forwardAuthStack) authzURL(audience string) string {
	return "http://" + s.authzAddr + "/authz/" + audience
}

// patchKey changes an APIKey's spec with a merge patch.
func (s *forwardAuthStack) patchKey(t *testing.T, ak *switchboardv1alpha1.APIKey, change func(*switchboardv1alpha1.APIKeySpec)) {
	t.Helper()
	before := ak.DeepCopy()
	change(&ak.Spec)
	if err := s.env.Client.Patch(testContext(t, 10*time.Second), ak, client.MergeFrom(before)); err != nil {
		t.Fatalf("patching APIKey %s: %v", ak.Name, err)
	}
}

// gateway is a gateway in front of the stack with its routes (forwardAuthStack.routes): each
// goes to the upstream once switchboard allows it.
type gateway struct {
	name string
	// base is the gateway's URL ("http://127.0.0.1:port").
	base string
	// nginxMode: the gateway asks /authz/nginx/<audience>, where every denial but a 401 is a
	// 403 carrying the code in X-Switchboard-Code.
	nginxMode bool
	// stripsAuthorization: the gateway does not pass the key on to the upstream.
	stripsAuthorization bool
}

// url is a path under a route's.
func (g gateway) url(route, rest string) string { return g.base + "/" + route + "/" + rest }

// deniedStatus is the status a denial with status reaches a client of the gateway with.
func (g gateway) deniedStatus(status int) int {
	if g.nginxMode && status != http.StatusUnauthorized {
		return http.StatusForbidden
	}
	return status
}

// requireDenied checks that a answered the denial code with status (as switchboard decides
// it: the gateway's own status is derived), carrying the code both in the body and in
// X-Switchboard-Code, and that the upstream was not reached.
func (g gateway) requireDenied(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.saw != nil {
		t.Fatalf("through %s: the upstream was reached, want %d %s: it saw %+v", g.name, status, code, *a.saw)
	}
	if want := g.deniedStatus(status); a.status != want || a.code != code || a.header.Get(headerCode) != code {
		t.Fatalf("through %s: got %s, want %d with code %s in the body and in %s", g.name, a, want, code, headerCode)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("through %s: the %s denial's Content-Type is %q, want application/json", g.name, code, ct)
	}
	if status == http.StatusUnauthorized && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("through %s: the %s denial has no Bearer challenge: WWW-Authenticate %q", g.name, code, a.header.Get("WWW-Authenticate"))
	}
	if status == http.StatusTooManyRequests {
		g.requireRetryAfter(t, a, code)
	}
}

// requireRetryAfter checks that a carries a Retry-After of whole seconds.
func (g gateway) requireRetryAfter(t *testing.T, a answer, code string) {
	t.Helper()
	if s, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("through %s: the %s denial's Retry-After is %q, want whole seconds ≥ 1", g.name, code, a.header.Get("Retry-After"))
	}
}

// requireAllowed checks that a is the upstream's answer and that the upstream was told who
// the key is (the namespace/name, UID and hint of ak), and received the client's Authorization.
func (g gateway) requireAllowed(t *testing.T, a answer, key string, ak *switchboardv1alpha1.APIKey) {
	t.Helper()
	if a.status != http.StatusOK || a.saw == nil {
		t.Fatalf("through %s: got %s, want the upstream's 200", g.name, a)
	}
	authorization := bearer(key)
	if g.stripsAuthorization {
		authorization = ""
	}
	want := upstreamSaw{
		Path:          a.saw.Path,
		Authorization: authorization,
		Key:           ak.Namespace + "/" + ak.Name,
		KeyUID:        string(ak.UID),
		KeyHint:       strings.ReplaceAll(ak.Status.KeyHint, "…", "..."), // as a header field carries it: ASCII
		KeyValues:     1,
	}
	if *a.saw != want {
		t.Fatalf("through %s: the upstream saw\n%+v\nwant\n%+v", g.name, *a.saw, want)
	}
}

// v1 is GET /v1/connections on the server with key, to compare a key's fate there.
func (s *forwardAuthStack) v1(t *testing.T, key string) answer {
	t.Helper()
	return do(t, s.apiURL+"/v1/connections", request{authorization: bearer(key)})
}

// checkGateway runs every case of the forward-auth contract through g. Each case speaks from
// its own client address, so that the failure limiter counts each case's failures apart.
func (s *forwardAuthStack) checkGateway(t *testing.T, g gateway) {
	t.Run("allowed: the upstream is told who the key is", func(t *testing.T) {
		key, ak := s.issueKey(t, "valid", switchboardv1alpha1.APIKeySpec{})
		if ak.Status.KeyHint == "" || ak.UID == "" {
			t.Fatalf("the APIKey has no hint or UID: %+v", ak.Status)
		}
		before := s.upstream.hits.Load()
		for _, audience := range []string{audienceOrders, audienceBilling} {
			a := do(t, g.url(audience, "items?x=1"), request{authorization: bearer(key), from: "198.51.100.1"})
			g.requireAllowed(t, a, key, ak)
			if a.saw.Path != "/"+audience+"/items" {
				t.Errorf("through %s: the upstream saw path %q", g.name, a.saw.Path)
			}
		}
		// A client cannot speak for the gateway: its own identity headers are replaced.
		forged := http.Header{headerKey: {"victim/admin"}, headerKeyUID: {"forged"}, headerKeyHint: {"forged"}}
		g.requireAllowed(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: "198.51.100.1", header: forged}), key, ak)
		if got := s.upstream.hits.Load() - before; got != 3 {
			t.Errorf("the upstream was reached %d times, want 3", got)
		}
	})

	t.Run("missing key: 401 API_KEY_MISSING", func(t *testing.T) {
		before := s.upstream.hits.Load()
		g.requireDenied(t, do(t, g.url(audienceOrders, "x"), request{from: "198.51.100.2"}), http.StatusUnauthorized, "API_KEY_MISSING")
		g.requireDenied(t, do(t, g.url(audienceOrders, "x"), request{authorization: "Basic dXNlcjpwdw==", from: "198.51.100.2"}), http.StatusUnauthorized, "API_KEY_MISSING")
		if got := s.upstream.hits.Load() - before; got != 0 {
			t.Errorf("the upstream was reached %d times by denied requests", got)
		}
	})

	t.Run("invalid key: 401 API_KEY_INVALID", func(t *testing.T) {
		key, _ := s.issueKey(t, "tampered", switchboardv1alpha1.APIKeySpec{})
		tampered := []byte(key)
		i := len(tampered) / 2
		if tampered[i] == 'A' {
			tampered[i] = 'B'
		} else {
			tampered[i] = 'A'
		}
		a := do(t, g.url(audienceOrders, "x"), request{authorization: bearer(string(tampered)), from: "198.51.100.3"})
		g.requireDenied(t, a, http.StatusUnauthorized, "API_KEY_INVALID")
		if !strings.Contains(a.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("through %s: WWW-Authenticate %q, want error=\"invalid_token\"", g.name, a.header.Get("WWW-Authenticate"))
		}
	})

	t.Run("audience: a key of orders is refused on billing and accepted on orders", func(t *testing.T) {
		key, ak := s.issueKey(t, "orders-only", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{audienceOrders}})
		g.requireDenied(t, do(t, g.url(audienceBilling, "x"), request{authorization: bearer(key), from: "198.51.100.4"}), http.StatusForbidden, "AUDIENCE_NOT_ALLOWED")
		g.requireAllowed(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: "198.51.100.4"}), key, ak)
		// The server's own /v1 has its audience too (connections): the same refusal there.
		if a := s.v1(t, key); a.status != http.StatusForbidden || a.code != "AUDIENCE_NOT_ALLOWED" {
			t.Errorf("/v1 with the orders key: got %s, want 403 AUDIENCE_NOT_ALLOWED", a)
		}
	})

	t.Run("source ranges: judged by the client address the gateway forwards", func(t *testing.T) {
		key, ak := s.issueKey(t, "sourced", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"203.0.113.0/24"}})
		g.requireDenied(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: "198.51.100.5"}), http.StatusForbidden, "SOURCE_NOT_ALLOWED")
		// Without a forwarded address the client is the test itself, on loopback: outside too.
		g.requireDenied(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key)}), http.StatusForbidden, "SOURCE_NOT_ALLOWED")
		g.requireAllowed(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: "203.0.113.7"}), key, ak)
	})

	t.Run("rate limit: the key's budget, then 429 API_KEY_RATE_LIMITED, shared with /v1", func(t *testing.T) {
		// 3 an hour: no request comes back during the test (one every 20 minutes).
		key, ak := s.issueKey(t, "limited", switchboardv1alpha1.APIKeySpec{RateLimit: &switchboardv1alpha1.APIKeyRateLimit{
			Requests: 3, Period: metav1.Duration{Duration: time.Hour}}})
		// The request that found the key known took one of the three.
		known := s.waitKnown(t, key, audienceOrders)
		if known.status != http.StatusOK || known.header.Get("RateLimit-Policy") != `"apikey";q=3;w=3600` {
			t.Fatalf("the forward-auth listener's answer: %s with RateLimit-Policy %q, want 200 with \"apikey\";q=3;w=3600", known, known.header.Get("RateLimit-Policy"))
		}
		remaining := rateLimitRemaining(t, known.header)
		if remaining < 1 {
			t.Fatalf("no budget left after one request of three: RateLimit %q", known.header.Get("RateLimit"))
		}
		for range remaining {
			g.requireAllowed(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: "198.51.100.6"}), key, ak)
		}
		a := do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: "198.51.100.6"})
		g.requireDenied(t, a, http.StatusTooManyRequests, "API_KEY_RATE_LIMITED")
		if !g.nginxMode && a.header.Get("RateLimit-Policy") == "" {
			t.Errorf("through %s: the 429 carries no RateLimit-Policy", g.name)
		}
		if a := s.v1(t, key); a.status != http.StatusTooManyRequests || a.code != "API_KEY_RATE_LIMITED" {
			t.Errorf("/v1 with the key whose budget the gateway used: got %s, want 429 API_KEY_RATE_LIMITED", a)
		}
	})

	t.Run("failure limiter: an address's failures, then RATE_LIMITED; a valid key still passes", func(t *testing.T) {
		key, ak := s.issueKey(t, "neighbour", switchboardv1alpha1.APIKeySpec{})
		const from = "198.51.100.7"
		for range failureBurst {
			g.requireDenied(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer("sb_live_nope"), from: from}), http.StatusUnauthorized, "API_KEY_INVALID")
		}
		g.requireDenied(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer("sb_live_nope"), from: from}), http.StatusTooManyRequests, "RATE_LIMITED")
		g.requireAllowed(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: from}), key, ak)
		// Another address is not concerned.
		g.requireDenied(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer("sb_live_nope"), from: "198.51.100.8"}), http.StatusUnauthorized, "API_KEY_INVALID")
	})

	t.Run("not ready: 503 NOT_READY is a denial, never a pass", func(t *testing.T) {
		key, ak := s.issueKey(t, "unready", switchboardv1alpha1.APIKeySpec{})
		before := s.upstream.hits.Load()
		a := do(t, g.url(routeUnready, "x"), request{authorization: bearer(key), from: "198.51.100.10"})
		g.requireDenied(t, a, http.StatusServiceUnavailable, "NOT_READY")
		g.requireRetryAfter(t, a, "NOT_READY")
		g.requireDenied(t, do(t, g.url(routeUnready, "x"), request{from: "198.51.100.10"}), http.StatusServiceUnavailable, "NOT_READY")
		if got := s.upstream.hits.Load() - before; got != 0 {
			t.Errorf("the upstream was reached %d times through the server that is not ready", got)
		}
		// The same key through the ready server.
		g.requireAllowed(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: "198.51.100.10"}), key, ak)
	})

	t.Run("revocation: refused through the gateway within a watch event", func(t *testing.T) {
		key, ak := s.issueKey(t, "revoked", switchboardv1alpha1.APIKeySpec{})
		g.requireAllowed(t, do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: "198.51.100.9"}), key, ak)
		start := time.Now()
		s.patchKey(t, ak, func(spec *switchboardv1alpha1.APIKeySpec) { spec.Revoked = true })
		var last answer
		for {
			last = do(t, g.url(audienceOrders, "x"), request{authorization: bearer(key), from: "198.51.100.9"})
			if last.saw == nil || time.Since(start) > revocationBound {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		took := time.Since(start)
		g.requireDenied(t, last, http.StatusUnauthorized, "API_KEY_INVALID")
		t.Logf("through %s: the key was refused %d ms after the patch that revoked it", g.name, took.Milliseconds())
		if a := s.v1(t, key); a.status != http.StatusUnauthorized || a.code != "API_KEY_INVALID" {
			t.Errorf("/v1 with the revoked key: got %s, want 401 API_KEY_INVALID", a)
		}
	})
}

// The shipped examples (examples/gateways): the addresses they name, which the tests replace
// with their own, and the route they configure.
const (
	exampleAuthzService = "switchboard-authz.switchboard-system.svc.cluster.local:9002"
	exampleUpstream     = "orders.shop.svc.cluster.local:8080"
	exampleRoute        = "v1/orders"
)

// readGatewayExample reads examples/gateways/<name>.
func readGatewayExample(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "gateways", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// replaceOnce replaces the one occurrence of old in an example, and fails when there is not
// exactly one: the test must run the example, not a text it no longer resembles.
func replaceOnce(t *testing.T, example, text, old, replacement string) string {
	t.Helper()
	if n := strings.Count(text, old); n != 1 {
		t.Fatalf("examples/gateways/%s has %d occurrences of %q, want 1: update the test with the example", example, n, old)
	}
	return strings.Replace(text, old, replacement, 1)
}

// checkExample runs a shipped example's cases through g, a gateway configured by it in front
// of the stack, and unready, the same configuration in front of the server that never becomes
// ready. The examples sit at the edge: they send switchboard the address of their own peer
// (the test, on loopback) and never a client's X-Forwarded-For; they keep the key from the
// upstream; NGINX's turns NGINX mode's 403s back into /v1's statuses. The cases make one
// authentication failure from loopback, within the failure limiter's burst.
func (s *forwardAuthStack) checkExample(t *testing.T, g, unready gateway) {
	t.Run("allowed: the upstream is told who the key is, and never sees the key", func(t *testing.T) {
		key, ak := s.issueKey(t, "example-valid", switchboardv1alpha1.APIKeySpec{})
		forged := http.Header{headerKey: {"victim/admin"}, headerKeyUID: {"forged"}, headerKeyHint: {"forged"}}
		g.requireAllowed(t, do(t, g.url(exampleRoute, "42"), request{authorization: bearer(key), header: forged}), key, ak)
	})
	t.Run("missing key: 401 API_KEY_MISSING", func(t *testing.T) {
		g.requireDenied(t, do(t, g.url(exampleRoute, "42"), request{}), http.StatusUnauthorized, "API_KEY_MISSING")
	})
	t.Run("audience: a key of billing is refused on the orders route", func(t *testing.T) {
		key, _ := s.issueKey(t, "example-billing", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{audienceBilling}})
		g.requireDenied(t, do(t, g.url(exampleRoute, "42"), request{authorization: bearer(key)}), http.StatusForbidden, "AUDIENCE_NOT_ALLOWED")
	})
	t.Run("source ranges: the gateway's peer, never a client's X-Forwarded-For", func(t *testing.T) {
		key, _ := s.issueKey(t, "example-sourced", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"203.0.113.0/24"}})
		g.requireDenied(t, do(t, g.url(exampleRoute, "42"), request{authorization: bearer(key), from: "203.0.113.7"}), http.StatusForbidden, "SOURCE_NOT_ALLOWED")
		local, ak := s.issueKey(t, "example-local", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"127.0.0.1/32"}})
		g.requireAllowed(t, do(t, g.url(exampleRoute, "42"), request{authorization: bearer(local), from: "203.0.113.7"}), local, ak)
	})
	t.Run("rate limit: 429 API_KEY_RATE_LIMITED", func(t *testing.T) {
		key, ak := s.issueKey(t, "example-limited", switchboardv1alpha1.APIKeySpec{RateLimit: &switchboardv1alpha1.APIKeyRateLimit{
			Requests: 2, Period: metav1.Duration{Duration: time.Hour}}})
		known := s.waitKnown(t, key, audienceOrders)
		for range rateLimitRemaining(t, known.header) {
			g.requireAllowed(t, do(t, g.url(exampleRoute, "42"), request{authorization: bearer(key)}), key, ak)
		}
		g.requireDenied(t, do(t, g.url(exampleRoute, "42"), request{authorization: bearer(key)}), http.StatusTooManyRequests, "API_KEY_RATE_LIMITED")
	})
	t.Run("not ready: 503 NOT_READY with Retry-After", func(t *testing.T) {
		key, _ := s.issueKey(t, "example-unready", switchboardv1alpha1.APIKeySpec{})
		a := do(t, unready.url(exampleRoute, "42"), request{authorization: bearer(key)})
		unready.requireDenied(t, a, http.StatusServiceUnavailable, "NOT_READY")
		unready.requireRetryAfter(t, a, "NOT_READY")
	})
}

// revocationBound is how long a revocation may take to reach the gateway's clients: one watch
// event takes milliseconds; the bound only keeps a broken watch from hanging the test.
const revocationBound = 5 * time.Second

// rateLimitRemaining reads r of the RateLimit field ("apikey";r=2;t=1200).
func rateLimitRemaining(t *testing.T, h http.Header) int {
	t.Helper()
	field := h.Get("RateLimit")
	for _, param := range strings.Split(field, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(param), "r="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				break
			}
			return n
		}
	}
	t.Fatalf("no remaining requests in RateLimit %q", field)
	return 0
}
