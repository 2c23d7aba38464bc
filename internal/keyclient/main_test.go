//go:build !unit

package keyclient_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/system"
)

// env is the real control plane; the real operator and /v1 server (sys) run against it in
// this process, so that every decision of the workflow is checked against what they do.
var (
	env *testenv.Env
	sys *system.System
)

func TestMain(m *testing.M) {
	system.Main(m, system.Options{}, func(s *system.System) { sys, env = s, s.Env })
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// identity creates a ServiceAccount bound to a Role with rules in namespace and returns a
// client (with watch, for interceptors) that carries a token minted for it.
func identity(t *testing.T, namespace, name string, rules ...rbacv1.PolicyRule) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(env.ServiceAccount(t, namespace, name, rules...), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The rights of the identities in these tests.
var (
	// ownerRules are what a key's owner needs for every operation of the workflow.
	ownerRules = []rbacv1.PolicyRule{
		{APIGroups: []string{switchboardv1alpha1.GroupVersion.Group}, Resources: []string{"apikeys"}, Verbs: []string{"get", "list", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}},
	}
	// thiefRules are another tenant user's: may read and delete the namespace's Secrets.
	thiefRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}}}
)

// v1Status is the status of GET /v1/connections with key.
func v1Status(t *testing.T, key string) int {
	t.Helper()
	status, _, err := sys.Connections(testContext(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// requireV1 waits (the server follows the API server through its informers) until GET
// /v1/connections with key answers want.
func requireV1(t *testing.T, what, key string, want int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what+" answers "+http.StatusText(want), func() error {
		if got := v1Status(t, key); got != want {
			return fmt.Errorf("GET /v1/connections: %d", got)
		}
		return nil
	})
}
