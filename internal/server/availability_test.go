//go:build !unit

package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	frontdoor "github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// gate stands between the server and the real API server: it can hold back the lists and
// watches of the cache, hang status PATCHes, or make the API server unreachable.
type gate struct {
	open        chan struct{}
	openOnce    sync.Once
	unreachable atomic.Bool
	hangPatches atomic.Bool
	hungPatches atomic.Int32
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) Open() { g.openOnce.Do(func() { close(g.open) }) }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// config returns a copy of the test environment's config that goes through the gate.
func (g *gate) config() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if g.unreachable.Load() {
				return nil, errors.New("the API server is unreachable (test gate)")
			}
			if r.Method == http.MethodPatch && g.hangPatches.Load() {
				g.hungPatches.Add(1)
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			p := r.URL.Path
			if strings.HasSuffix(p, "/connections") || strings.HasSuffix(p, "/apikeys") || strings.HasSuffix(p, "/secrets") {
				select {
				case <-g.open:
				case <-r.Context().Done():
					return nil, r.Context().Err()
				}
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

// TestNotReadyUntilSynced: before the cache has synced, /v1 answers 503 NOT_READY (never
// API_KEY_INVALID) and /readyz fails; after, it serves, and keeps serving from the cache when
// the API server goes away.
func TestNotReadyUntilSynced(t *testing.T) {
	ns := env.Namespace(t, "sync")
	newConnection(t, ns, "one", "conn_one", nil)
	k := newKey(t, ns, "early", switchboardv1alpha1.APIKeySpec{})
	g := newGate()
	probes := testenv.FreeAddr(t)
	s := startServer(t, g.config(), &sc{HealthProbeBindAddress: &probes}, Deps{}, false)
	eventually(t, "the probe listener", func() bool { return probe(probes, "/healthz") == http.StatusOK })

	for _, key := range []string{k.Key, "", "sb_live_unknown"} {
		resp := s.get(t, "/v1/connections", key)
		if resp.Status != http.StatusServiceUnavailable || resp.errorCode(t) != apicode.NotReady || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("before sync: %d %s (Retry-After %q), want 503 NOT_READY", resp.Status, resp.Body, resp.Header.Get("Retry-After"))
		}
	}
	if code := probe(probes, "/readyz"); code == http.StatusOK {
		t.Fatal("/readyz passes before the cache has synced")
	}
	if resp := s.get(t, "/openapi.yaml", ""); resp.Status != http.StatusOK {
		t.Errorf("/openapi.yaml needs no cache, got %d", resp.Status)
	}

	g.Open()
	eventually(t, "the server to become ready", func() bool { return s.get(t, "/v1/connections", k.Key).Status == http.StatusOK })
	if code := probe(probes, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d after sync, want 200", code)
	}
	if got := ids(s.get(t, "/v1/connections", k.Key).connections(t)); len(got) != 1 || got[0] != "conn_one" {
		t.Errorf("after sync: %v", got)
	}

	g.unreachable.Store(true)
	for range 20 {
		if got := ids(s.get(t, "/v1/connections", k.Key).connections(t)); len(got) != 1 {
			t.Fatalf("with the API server gone: %v", got)
		}
		if resp := s.get(t, "/v1/connections", "sb_live_unknown"); resp.Status != http.StatusUnauthorized {
			t.Fatalf("with the API server gone, an unknown key got %d", resp.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := probe(probes, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d with the API server gone after sync, want 200 (serving from cache)", code)
	}
}

// TestLastUsedAt: a request makes the server write status.lastUsedAt, once per interval.
func TestLastUsedAt(t *testing.T) {
	ns := env.Namespace(t, "lastused")
	k := newKey(t, ns, "busy", switchboardv1alpha1.APIKeySpec{})
	s := startServer(t, nil, nil, Deps{LastUsedFlush: 20 * time.Millisecond}, true)
	before := time.Now().Add(-time.Second)
	if resp := s.get(t, "/v1/connections", k.Key); resp.Status != 200 {
		t.Fatalf("status %d", resp.Status)
	}
	var ak switchboardv1alpha1.APIKey
	eventually(t, "status.lastUsedAt", func() bool {
		if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(k.APIKey), &ak); err != nil {
			t.Fatal(err)
		}
		return ak.Status.LastUsedAt != nil
	})
	first := ak.Status.LastUsedAt.Time
	if first.Before(before) || first.After(time.Now().Add(time.Second)) {
		t.Errorf("lastUsedAt = %v, want about now", first)
	}
	if ak.Status.KeyHint != k.APIKey.Status.KeyHint {
		t.Errorf("the merge patch changed other status fields: keyHint %q", ak.Status.KeyHint)
	}
	// Within the interval (1m), more uses write nothing more.
	time.Sleep(1100 * time.Millisecond)
	for range 5 {
		s.get(t, "/v1/connections", k.Key)
	}
	time.Sleep(200 * time.Millisecond)
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(k.APIKey), &ak); err != nil {
		t.Fatal(err)
	}
	if !ak.Status.LastUsedAt.Time.Equal(first) {
		t.Errorf("lastUsedAt was rewritten within the interval: %v then %v", first, ak.Status.LastUsedAt.Time)
	}
}

// TestHungAPIServerNeverSlowsRequests: while the lastUsedAt write hangs, requests are served.
func TestHungAPIServerNeverSlowsRequests(t *testing.T) {
	ns := env.Namespace(t, "hung")
	k := newKey(t, ns, "patient", switchboardv1alpha1.APIKeySpec{})
	g := newGate()
	g.Open()
	g.hangPatches.Store(true)
	s := startServer(t, g.config(), nil, Deps{LastUsedFlush: 10 * time.Millisecond}, true)
	s.get(t, "/v1/connections", k.Key)
	eventually(t, "a lastUsedAt PATCH to hang", func() bool { return g.hungPatches.Load() > 0 })
	for range 100 {
		if resp := s.get(t, "/v1/connections", k.Key); resp.Status != 200 {
			t.Fatalf("status %d while a PATCH hangs", resp.Status)
		}
	}
}

// TestGracefulShutdown: on shutdown, readiness fails first while requests are still answered,
// then the server drains and Run returns nil.
func TestGracefulShutdown(t *testing.T) {
	ns := env.Namespace(t, "shutdown")
	k := newKey(t, ns, "last", switchboardv1alpha1.APIKeySpec{})
	probes := testenv.FreeAddr(t)
	s := startServer(t, nil, &sc{HealthProbeBindAddress: &probes, Shutdown: configv1alpha1.Shutdown{ShutdownDelay: &metav1.Duration{Duration: 3 * time.Second}}}, Deps{}, true)
	eventually(t, "readiness", func() bool { return probe(probes, "/readyz") == http.StatusOK })
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop() }()
	eventually(t, "readiness to fail", func() bool { return probe(probes, "/readyz") != http.StatusOK })
	if resp := s.get(t, "/v1/connections", k.Key); resp.Status != 200 {
		t.Errorf("while draining: %d, want 200", resp.Status)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("Run did not return")
	}
	if resp, err := http.Get(s.URL + "/openapi.yaml"); err == nil {
		_ = resp.Body.Close()
		t.Error("the listener still answers after Run returned")
	}
}

// TestOversizedHeader: a header past MaxHeaderBytes is refused with 431 before the handler.
func TestOversizedHeader(t *testing.T) {
	s := startServer(t, nil, nil, Deps{}, true)
	resp := s.request(t, http.MethodGet, "/v1/connections", func(h http.Header) {
		h.Set("X-Padding", strings.Repeat("a", 16<<10))
	})
	if resp.Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d, want 431", resp.Status)
	}
}

// TestHeaderLimitBoundary: a request line and headers of exactly frontdoor.MaxHeaderBlock bytes (CRLFs
// included, as docs/api.md says) reach the handler; one byte more is refused with 431 before it.
func TestHeaderLimitBoundary(t *testing.T) {
	s := startServer(t, nil, noFailureLimit(nil), Deps{}, true)
	addr := strings.TrimPrefix(s.URL, "http://")
	for _, tt := range []struct {
		size int
		want int
	}{
		{frontdoor.MaxHeaderBlock, http.StatusUnauthorized}, // served: no key
		{frontdoor.MaxHeaderBlock + 1, http.StatusRequestHeaderFieldsTooLarge},
	} {
		head := "GET /v1/connections HTTP/1.1\r\nHost: switchboard\r\nConnection: close\r\nX-Padding: "
		tail := "\r\n\r\n"
		raw := head + strings.Repeat("a", tt.size-len(head)-len(tail)) + tail
		if len(raw) != tt.size {
			t.Fatalf("built %d bytes, want %d", len(raw), tt.size)
		}
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%d bytes: %v", tt.size, err)
		}
		_ = resp.Body.Close()
		_ = conn.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("a header block of %d bytes: %d, want %d", tt.size, resp.StatusCode, tt.want)
		}
	}
}

// TestRevokeIsAppliedWithinOneSecond measures how long a revocation takes to reach a client.
func TestRevokeIsAppliedWithinOneSecond(t *testing.T) {
	ns := env.Namespace(t, "revoke")
	byFlag := newKey(t, ns, "by-flag", switchboardv1alpha1.APIKeySpec{})
	byHash := newKey(t, ns, "by-hash", switchboardv1alpha1.APIKeySpec{})
	s := startServer(t, nil, noFailureLimit(nil), Deps{}, true)
	for name, revoke := range map[string]struct {
		key string
		do  func(context.Context) error
	}{
		"spec.revoked": {byFlag.Key, func(c context.Context) error {
			patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"revoked":true}}`))
			return env.Client.Patch(c, byFlag.APIKey, patch)
		}},
		"hash Secret deleted": {byHash.Key, func(c context.Context) error { return env.Client.Delete(c, byHash.Secret) }},
	} {
		if resp := s.get(t, "/v1/connections", revoke.key); resp.Status != 200 {
			t.Fatalf("%s: before: %d", name, resp.Status)
		}
		start := time.Now()
		if err := revoke.do(ctx(t)); err != nil {
			t.Fatal(err)
		}
		for s.get(t, "/v1/connections", revoke.key).Status != http.StatusUnauthorized {
			if time.Since(start) > time.Second {
				t.Fatalf("%s: still accepted 1s after the revocation", name)
			}
			time.Sleep(time.Millisecond)
		}
		t.Logf("%s: refused %v after the write was sent", name, time.Since(start).Round(100*time.Microsecond))
	}
}

// TestRunRefusesBadOptions: a configuration that cannot work stops Run with a clear error.
func TestRunRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		c    *sc
		want string
	}{
		{"bad key prefix", &sc{KeyPrefix: "Not_A_Prefix"}, "key prefix"},
		{"panel address without a panel", &sc{Panel: &configv1alpha1.ServerPanel{Listen: "127.0.0.1:0"}}, "panel"},
		{"invalid listen address", &sc{Listen: ptr.To("256.0.0.1:80")}, "listening"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(ctx(t), testConfig(tt.c), Deps{RESTConfig: env.Config})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error about %q", err, tt.want)
			}
		})
	}
}
