//go:build !unit

package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestWithOperator runs the real operator and the server together: a Connection gets its id, an
// APIKey its key (claimed through the reveal protocol), the key lists the Connection, a rotation
// with grace keeps both keys working, and a revocation refuses both.
func TestWithOperator(t *testing.T) {
	sys := env.Namespace(t, "e2e-system")
	ns := env.Namespace(t, "e2e")
	startOperator(t, sys, ns)
	s := startServer(t, nil, noFailureLimit(&sc{SystemNamespace: sys}), Deps{}, true)

	conn := &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warehouse"},
		Spec:       switchboardv1alpha1.ConnectionSpec{DisplayName: "Warehouse", Provider: "postgres"},
	}
	if err := env.Client.Create(ctx(t), conn); err != nil {
		t.Fatal(err)
	}
	ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ci"}}
	if err := env.Client.Create(ctx(t), ak); err != nil {
		t.Fatal(err)
	}
	claim := func(generation int64) string {
		t.Helper()
		var key string
		eventually(t, "the operator to publish the key", func() bool {
			if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(ak), ak); err != nil {
				t.Fatal(err)
			}
			if ak.Status.KeyGeneration != generation || ak.Status.RevealSecretName == "" {
				return false
			}
			got, err := keyclient.Claim(ctx(t), env.Client, ak)
			if err != nil {
				t.Fatalf("claiming the key: %v", err)
			}
			key = got.Key
			return true
		})
		return key
	}
	first := claim(1)
	eventually(t, "the key to list the Connection with its id", func() bool {
		resp := s.get(t, "/v1/connections", first)
		return resp.Status == http.StatusOK && len(resp.connections(t)) == 1
	})
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(conn), conn); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.get(t, "/v1/connections", first).connections(t)); got[0] != conn.Status.ID {
		t.Errorf("listed %v, want the operator's id %s", got, conn.Status.ID)
	}

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"rotation":{"requestedAt":"2026-11-22T05:00:00Z","gracePeriod":"1h"}}}`))
	if err := env.Client.Patch(ctx(t), ak, patch); err != nil {
		t.Fatal(err)
	}
	second := claim(2)
	eventually(t, "the rotated key to work", func() bool { return s.get(t, "/v1/connections", second).Status == http.StatusOK })
	if resp := s.get(t, "/v1/connections", first); resp.Status != http.StatusOK {
		t.Errorf("the previous key within its grace: %d, want 200", resp.Status)
	}

	start := time.Now()
	if err := env.Client.Patch(ctx(t), ak, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"revoked":true}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both keys to be refused", func() bool {
		return s.get(t, "/v1/connections", first).Status == http.StatusUnauthorized &&
			s.get(t, "/v1/connections", second).Status == http.StatusUnauthorized
	})
	t.Logf("revocation through the operator refused both keys after %v", time.Since(start).Round(time.Millisecond))
}

// startOperator runs the real operator for tenant namespace ns and system namespace sys until
// the test ends.
func startOperator(t *testing.T, sys, ns string) {
	t.Helper()
	opCtx, stopOperator := context.WithCancel(context.Background())
	opDone := make(chan error, 1)
	go func() {
		opDone <- operator.Run(opCtx, testenv.OperatorConfiguration(sys), operator.Deps{
			RESTConfig: env.Config, Namespaces: []string{ns}, SkipControllerNameValidation: true,
			// Not t's logger: the operator's event broadcaster may still log after Run returns.
			Logger: logr.Discard(),
		})
	}()
	t.Cleanup(func() {
		stopOperator()
		if err := <-opDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("operator.Run: %v", err)
		}
	})
}

// deliveredKey waits until the delivery Secret ns/name holds the key of generation gen and
// that key works on s's /v1, and returns it.
func deliveredKey(t *testing.T, s *testServer, ns, name, gen string) string {
	t.Helper()
	var key string
	eventually(t, "the key of generation "+gen+" delivered and working", func() bool {
		secret := &corev1.Secret{}
		if err := env.Client.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil ||
			secret.Labels[keysecret.LabelGeneration] != gen {
			return false
		}
		key = string(secret.Data[keysecret.DataKey])
		return s.get(t, "/v1/connections", key).Status == http.StatusOK
	})
	return key
}
