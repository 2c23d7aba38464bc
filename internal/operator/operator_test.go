//go:build !unit

package operator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/version"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

// startManager runs an operator manager of c with deps (env's client, controller names
// unchecked, as several run in one process) until the test ends.
func startManager(t *testing.T, c *configv1alpha1.OperatorConfiguration, deps operator.Deps) manager.Manager {
	t.Helper()
	deps.RESTConfig, deps.SkipControllerNameValidation = env.Config, true
	mgr, err := operator.NewManager(c, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _ = mgr.Start(ctx) }()
	return mgr
}

// TestRun runs the operator as `switchboard operator` does: leader election, probes, metrics;
// it takes the Lease, serves the probes and metrics, publishes its version, issues keys, and
// stops when told.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	system, tenant := env.Namespace(t, "run-system"), env.Namespace(t, "run-tenant")
	health, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- operator.Run(runCtx, &configv1alpha1.OperatorConfiguration{
			SystemNamespace:        system,
			LeaderElect:            ptr.To(true),
			HealthProbeBindAddress: &health,
			Metrics:                configv1alpha1.Metrics{MetricsBindAddress: &metrics, MetricsSecure: ptr.To(false)},
		}, operator.Deps{RESTConfig: env.Config, SkipControllerNameValidation: true})
	}()

	testenv.Eventually(t, 30*time.Second, "the leader election Lease", func() error {
		var lease coordinationv1.Lease
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: system, Name: operator.DefaultLeaderElectionID}, &lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return errors.New("no holder")
		}
		return nil
	})
	for _, url := range []string{"http://" + health + "/healthz", "http://" + health + "/readyz", "http://" + metrics + "/metrics"} {
		testenv.Eventually(t, 30*time.Second, url, func() error {
			resp, err := http.Get(url) //nolint:gosec // a test URL built from a local address
			if err != nil {
				return err
			}
			defer func() { _ = resp.Body.Close() }()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
	}

	// The leader publishes the build it runs, for `kubectl switchboard version`.
	testenv.Eventually(t, 30*time.Second, "the version ConfigMap", func() error {
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: system, Name: version.ConfigMap}, &cm); err != nil {
			return err
		}
		if got, ok := version.FromData(cm.Data); !ok || got != version.Get() {
			return fmt.Errorf("it says %v, want %+v", cm.Data, version.Get())
		}
		return nil
	})

	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "run"}}
	if err := env.Client.Create(ctx, key); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the key issued", func() error {
		got := &switchboardv1alpha1.APIKey{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(key), got); err != nil {
			return err
		}
		if got.Status.KeyGeneration != 1 {
			return errors.New("not issued yet")
		}
		return nil
	})

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after its context ended", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestManagerCachesOnlyOwnSecrets: the manager's cache holds switchboard's Secrets only, and
// without managedFields.
func TestManagerCachesOnlyOwnSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := env.Namespace(t, "cache")
	mgr := startManager(t, testenv.OperatorConfiguration(ns), operator.Deps{Namespaces: []string{ns}})

	// "theirs" first: the watch delivers in order, so once "ours" is cached, "theirs" would be too.
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ours", Labels: map[string]string{keysecret.LabelManagedBy: keysecret.ManagedBy}}},
	} {
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the cache to list switchboard's Secret", func() error {
		var list corev1.SecretList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d Secrets cached", len(list.Items))
		}
		if list.Items[0].Name != "ours" {
			t.Fatalf("the cache holds Secret %s, which switchboard does not manage", list.Items[0].Name)
		}
		if len(list.Items[0].ManagedFields) != 0 {
			t.Fatal("the cache keeps managedFields")
		}
		return nil
	})
}
