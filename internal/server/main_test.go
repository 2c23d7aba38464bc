//go:build !unit

package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/fixture"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

var ensureSystem sync.Once

func ensureSystemNamespace(t testing.TB) {
	ensureSystem.Do(func() {
		if err := env.EnsureNamespace(context.Background(), systemNamespace); err != nil {
			t.Fatal(err)
		}
	})
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// testServer is a running server.Run on a loopback port.
type testServer struct {
	URL string
	// Stop cancels Run's context and returns what Run returned. It is safe to call twice.
	Stop func() error
}

// startServer runs Run with c (testConfig) as cfg's identity (nil: env's) and deps (a loopback
// Listener and the test's logger filled in), and waits until it is ready unless wait is false.
// It stops the server when the test ends.
func startServer(t testing.TB, cfg *rest.Config, c *sc, deps Deps, wait bool) *testServer {
	t.Helper()
	ensureSystemNamespace(t)
	l := testenv.ListenLoopback(t)
	deps.Listener = l
	if deps.Logger.GetSink() == nil {
		deps.Logger = testenv.Logger(t)
	}
	deps.RESTConfig = cfg
	if cfg == nil {
		deps.RESTConfig = env.Config
	}
	c = testConfig(c)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, c, deps) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(60 * time.Second):
				runErr = errors.New("Run did not return after its context was cancelled")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run returned: %v", err)
		}
	})
	s := &testServer{URL: "http://" + l.Addr().String(), Stop: stop}
	if wait {
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp := s.get(t, "/v1/connections", "")
			if resp.Status != http.StatusServiceUnavailable {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the server did not become ready in 30s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return s
}

// response is a read response.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) errorCode(t testing.TB) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, r.Body)
	}
	if e.Error.Message == "" {
		t.Errorf("error %s has no message", e.Error.Code)
	}
	return e.Error.Code
}

// connections decodes a list response, checking it has exactly one property.
func (r response) connections(t testing.TB) []map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.Status, r.Body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &top); err != nil {
		t.Fatalf("list body is not a JSON object: %v: %s", err, r.Body)
	}
	if len(top) != 1 || top["connections"] == nil {
		t.Fatalf("list body must have exactly the property connections: %s", r.Body)
	}
	var list []map[string]any
	if err := json.Unmarshal(top["connections"], &list); err != nil || list == nil {
		t.Fatalf("connections is not an array: %v: %s", err, r.Body)
	}
	return list
}

func ids(list []map[string]any) []string {
	out := make([]string, 0, len(list))
	for _, c := range list {
		out = append(out, c["id"].(string))
	}
	return out
}

func (s *testServer) do(t testing.TB, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// get requests path with `Authorization: Bearer key` (no header when key is empty).
func (s *testServer) get(t testing.TB, path, key string) response {
	t.Helper()
	return s.request(t, http.MethodGet, path, func(h http.Header) {
		if key != "" {
			h.Set("Authorization", "Bearer "+key)
		}
	})
}

func (s *testServer) request(t testing.TB, method, path string, header func(http.Header)) response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if header != nil {
		header(req.Header)
	}
	return s.do(t, req)
}

// patchSpec changes k's spec on the API server by a merge patch of what mutate changes: the
// server writes lastUsedAt to the same APIKey while the test uses its key, so an Update of the
// object the test holds may conflict (it did, twice in 20 runs on a busy machine).
func patchSpec(t testing.TB, k *switchboardv1alpha1.APIKey, mutate func(*switchboardv1alpha1.APIKeySpec)) {
	t.Helper()
	before := k.DeepCopy()
	mutate(&k.Spec)
	if err := env.Client.Patch(ctx(t), k, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// keyFixture is an APIKey and its key, made the way the operator makes them.
type keyFixture struct {
	Key    string
	APIKey *switchboardv1alpha1.APIKey
	Secret *corev1.Secret
}

// newKey creates an APIKey in ns with spec, a generated key, and its hash Secret.
func newKey(t testing.TB, ns, name string, spec switchboardv1alpha1.APIKeySpec) *keyFixture {
	t.Helper()
	ensureSystemNamespace(t)
	key, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := env.Client.Create(ctx(t), ak); err != nil {
		t.Fatalf("creating APIKey %s/%s: %v", ns, name, err)
	}
	now := metav1.Now()
	ak.Status.KeyGeneration = 1
	ak.Status.KeyHint = apikey.Hint(key)
	ak.Status.CreatedAt = &now
	if err := env.Client.Status().Update(ctx(t), ak); err != nil {
		t.Fatalf("writing APIKey status: %v", err)
	}
	f := &keyFixture{Key: key, APIKey: ak}
	f.Secret = fixture.HashSecret(systemNamespace, ak, key, "", time.Time{})
	if err := env.Client.Create(ctx(t), f.Secret); err != nil {
		t.Fatalf("creating the hash Secret: %v", err)
	}
	return f
}

// newConnection creates a Connection and gives it status.id, as the operator would.
func newConnection(t testing.TB, ns, name, id string, lbls map[string]string) *switchboardv1alpha1.Connection {
	t.Helper()
	c := &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: switchboardv1alpha1.ConnectionSpec{
			DisplayName:          strings.ToUpper(name[:1]) + name[1:],
			Provider:             "postgres",
			Metadata:             map[string]switchboardv1alpha1.MetadataValue{"region": "eu-west-1"},
			CredentialsSecretRef: &corev1.LocalObjectReference{Name: "secret-credentials-of-" + name},
		},
	}
	if err := env.Client.Create(ctx(t), c); err != nil {
		t.Fatalf("creating Connection %s/%s: %v", ns, name, err)
	}
	if id != "" {
		c.Status.ID = id
		if err := env.Client.Status().Update(ctx(t), c); err != nil {
			t.Fatalf("writing Connection status: %v", err)
		}
	}
	return c
}

// eventually is testenv.Eventually for 20s, on a condition that holds or not.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// probe GETs a probe endpoint and returns its status, or 0 when nothing answers.
func probe(addr, path string) int {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
