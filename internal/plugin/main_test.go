//go:build !unit

package plugin

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/system"
)

// env is the real control plane; the real operator and /v1 API server run against it in this
// process.
var env *testenv.Env

func TestMain(m *testing.M) {
	system.Main(m, system.Options{}, func(s *system.System) { sys, env = s, s.Env })
}

// sys is the whole system running in this process.
var sys *system.System

// apiStatus is the HTTP status of GET /v1/connections with key as the bearer key.
func apiStatus(t *testing.T, key string) int {
	t.Helper()
	status, _, err := sys.Connections(testContext(t), key)
	if err != nil {
		t.Fatalf("calling the API server: %v", err)
	}
	return status
}

// eventuallyStatus waits (the server's cache follows the API server) until GET
// /v1/connections with key answers want.
func eventuallyStatus(t *testing.T, key string, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := apiStatus(t, key)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/connections answered %d, want %d", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// kubeconfig writes a kubeconfig file for cfg's identity (client certificate or bearer
// token) with namespace as the context's namespace, as a user's would be.
func kubeconfig(t *testing.T, cfg *rest.Config, namespace string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, cfg.Host, namespace, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs `kubectl switchboard args…` in-process, through the same entry point as the
// binary, as the identity of cfg in namespace, with stdin as its input.
func run(t *testing.T, cfg *rest.Config, namespace, stdin string, args ...string) result {
	t.Helper()
	var out, errOut strings.Builder
	full := append([]string{"--kubeconfig", kubeconfig(t, cfg, namespace)}, args...)
	code := Main(testContext(t), streams(&out, &errOut, stdin), nil, full)
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// admin runs the plugin as the cluster admin.
func admin(t *testing.T, namespace string, args ...string) result {
	t.Helper()
	return run(t, env.Config, namespace, "", args...)
}

// mustSucceed fails the test unless r exited 0.
func mustSucceed(t *testing.T, r result) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// serviceAccountConfig creates a ServiceAccount bound to a Role with rules in namespace and
// returns a client configuration that carries a token minted for it (TokenRequest API).
func serviceAccountConfig(t *testing.T, namespace, name string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	return env.ServiceAccount(t, namespace, name, rules...)
}

// rule grants verbs on resources of group.
func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}
