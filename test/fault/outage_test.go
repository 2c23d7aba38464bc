//go:build !unit

package fault

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// expectation is the answer the contract requires for one kind of request.
type expectation struct {
	name, auth string
	status     int
	code       string
	listed     int // connections in a 200 body
}

func (e expectation) check(r response) error {
	if r.status != e.status || r.code != e.code {
		return fmt.Errorf("%s: got %d %q, want %d %q", e.name, r.status, r.code, e.status, e.code)
	}
	if e.status == http.StatusOK {
		if n := bytes.Count(r.body, []byte(`{"id":"conn_`)); n != e.listed {
			return fmt.Errorf("%s: listed %d connections, want %d", e.name, n, e.listed)
		}
	}
	return nil
}

// TestAPIServerOutage: with the server serving, the API server becomes unreachable for 30 s.
// Every request keeps its correct answer from the cache (0 wrong answers, 0 5xx); once the API
// server is back, changes propagate again.
func TestAPIServerOutage(t *testing.T) {
	scanAfter(t)
	ensureSystemNamespace(t)
	ns := env.Namespace(t, "outage")
	direct := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", direct, "--leader-elect=false")
	createConnections(t, ns, "alpha", "beta", "gamma")
	valid, revoked := issue(t, ns, "valid"), issue(t, ns, "revoked")
	revoke(t, ns, "revoked")

	p := newProxy(t, apiServerHostPort(t))
	_, api, health := startServer(t, kubeconfig(t, env.Config, p.addr()), "--auth-failure-rate=0")
	expectations := []expectation{
		{name: "valid key", auth: "Bearer " + valid, status: 200, listed: 3},
		{name: "revoked key", auth: "Bearer " + revoked, status: 401, code: "API_KEY_INVALID"},
		{name: "no header", status: 401, code: "API_KEY_MISSING"},
		{name: "unknown key", auth: "Bearer " + otherKey(valid), status: 401, code: "API_KEY_INVALID"},
	}
	testenv.Eventually(t, 30*time.Second, "the server answering correctly before the outage", func() error {
		for _, e := range expectations {
			r, err := call(api+"/v1/connections", e.auth)
			if err != nil {
				return err
			}
			if err := e.check(r); err != nil {
				return err
			}
		}
		return nil
	})

	p.cut()
	var requests, wrong, fiveXX atomic.Int64
	var firstWrong atomic.Value
	stop := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; time.Now().Before(stop); i++ {
				e := expectations[i%len(expectations)]
				r, err := call(api+"/v1/connections", e.auth)
				requests.Add(1)
				if err == nil {
					err = e.check(r)
				}
				if err != nil {
					wrong.Add(1)
					firstWrong.CompareAndSwap(nil, err.Error())
				}
				if r.status >= 500 {
					fiveXX.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	t.Logf("during a 30 s API-server outage: %d requests, %d wrong answers, %d 5xx", requests.Load(), wrong.Load(), fiveXX.Load())
	if wrong.Load() != 0 || fiveXX.Load() != 0 {
		t.Fatalf("%d wrong answers and %d 5xx during the outage; first: %v", wrong.Load(), fiveXX.Load(), firstWrong.Load())
	}
	if r, err := call(health+"/readyz", ""); err != nil || r.status != 200 {
		t.Fatalf("a server that can answer from its cache must stay ready during an outage: %v %v", r.status, err)
	}

	p.restore()
	createConnections(t, ns, "delta")
	revoke(t, ns, "valid")
	// client-go's reflectors back off while the API server is away; allow for that.
	testenv.Eventually(t, 60*time.Second, "changes made after the outage reaching the server", func() error {
		r, err := call(api+"/v1/connections", "Bearer "+valid)
		if err != nil {
			return err
		}
		if r.status != http.StatusUnauthorized || r.code != "API_KEY_INVALID" {
			return errors.New("the key revoked after the outage still works")
		}
		return nil
	})
}

// TestStartBeforeSync: a server started while the API server is unreachable answers a valid
// key with 503, never API_KEY_INVALID, and fails readiness; once it syncs, the key works.
func TestStartBeforeSync(t *testing.T) {
	scanAfter(t)
	ensureSystemNamespace(t)
	ns := env.Namespace(t, "beforesync")
	direct := kubeconfig(t, env.Config, apiServerHostPort(t))
	op := startOperator(t, "operator", direct, "--leader-elect=false")
	createConnections(t, ns, "alpha")
	key := issue(t, ns, "early")
	op.kill()

	p := newProxy(t, apiServerHostPort(t))
	p.cut()
	_, api, health := startServer(t, kubeconfig(t, env.Config, p.addr()), "--auth-failure-rate=0")
	testenv.Eventually(t, 30*time.Second, "the server listening", func() error {
		_, err := call(health+"/healthz", "")
		return err
	})
	for range 20 {
		r, err := call(api+"/v1/connections", "Bearer "+key)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("before sync a valid key got %d %q; want 503", r.status, r.code)
		}
		if ready, err := call(health+"/readyz", ""); err != nil || ready.status == 200 {
			t.Fatalf("readyz must fail before sync: %d %v", ready.status, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.restore()
	testenv.Eventually(t, 60*time.Second, "the key working once synced", func() error {
		r, err := call(api+"/v1/connections", "Bearer "+key)
		if err != nil {
			return err
		}
		return expectation{name: "valid key", status: 200, listed: 1}.check(r)
	})
}

// TestStopBeforeSync: the operator and the server, told to stop (SIGTERM, as a rollout or a
// scale-down does) while their caches have never synced (an install whose RBAC is missing: every
// list is forbidden), exit promptly rather than spin until the kubelet kills them
// (controller-runtime's manager never returns when stopped before its caches sync:
// kubernetes-sigs/controller-runtime#3440).
func TestStopBeforeSync(t *testing.T) {
	scanAfter(t)
	ensureSystemNamespace(t)
	name := "norbac-" + env.Namespace(t, "stop")
	ctx := ctxFor(t, time.Minute)
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: systemNamespace}}); err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	noRights := kubeconfig(t, cfg, apiServerHostPort(t))

	server, _, health := startServer(t, noRights)
	op := startOperator(t, "operator", noRights, "--leader-elect=false")
	testenv.Eventually(t, 30*time.Second, "the server listening", func() error {
		_, err := call(health+"/healthz", "")
		return err
	})
	time.Sleep(2 * time.Second) // both are waiting for their caches
	for _, c := range []*process{server, op} {
		if c.Exited() {
			t.Fatalf("%s exited before it was told to stop: %v", c.Name(), c.Err())
		}
		start := time.Now()
		if err := c.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.Done():
			t.Logf("%s exited %v after SIGTERM", c.Name(), time.Since(start).Round(time.Millisecond))
		case <-time.After(20 * time.Second):
			t.Errorf("%s still running 20 s after SIGTERM with its caches never synced", c.Name())
		}
	}
}

// otherKey is key with its last character changed: a key of the same shape that was never
// issued (changed to "x", unless it is one already, as one key in 62 ends).
func otherKey(key string) string {
	last := "x"
	if strings.HasSuffix(key, "x") {
		last = "y"
	}
	return key[:len(key)-1] + last
}
