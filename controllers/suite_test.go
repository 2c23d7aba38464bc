//go:build !unit

package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

// revealTTL is the operator's --reveal-ttl in these tests; the fake clock crosses it.
const revealTTL = time.Hour

// logSink records every log line of one operator, so tests can prove the key never appears.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) add(prefix, args string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, prefix+" "+args)
}

func (s *logSink) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// operatorRun is one operator (a real manager) watching a test's namespaces.
type operatorRun struct {
	clock  *clocktesting.FakeClock
	logs   *logSink
	system string
	stop   func()
}

// startOperator runs the operator's manager until the test ends (or stop is called), watching
// only the given namespaces so that tests running in parallel do not see each other's objects.
// It runs as the operator's ServiceAccount under the shipped policy that refuses it any spec
// write (operatorConfig).
func startOperator(t *testing.T, clk *clocktesting.FakeClock, system string, namespaces ...string) *operatorRun {
	t.Helper()
	return startOperatorAs(t, operatorConfig(t), clk, system, namespaces...)
}

// shippedOperator is the ServiceAccount config/rbac/operator_spec_policy.yaml names.
const shippedOperator = "system:serviceaccount:switchboard-system:switchboard-operator"

// operatorSpecRefused is in the message of that policy, when it refuses a spec write.
const operatorSpecRefused = "never changes the spec of an APIKey or a Connection"

var (
	operatorIdentity     sync.Once
	operatorIdentityCfg  *rest.Config
	operatorIdentityFail string
)

// operatorConfig is the client configuration every operator of this suite runs with: the user
// shippedOperator (in system:masters, so RBAC is not what is tested here), with
// config/rbac/operator_spec_policy.yaml installed and enforced once for the whole suite. Any
// code path of the operator that changes an APIKey's or a Connection's spec is then refused
// with the policy's message, and the test that took it fails.
func operatorConfig(t *testing.T) *rest.Config {
	t.Helper()
	operatorIdentity.Do(func() { operatorIdentityCfg, operatorIdentityFail = installOperatorSpecPolicy() })
	if operatorIdentityFail != "" {
		t.Fatal(operatorIdentityFail)
	}
	return operatorIdentityCfg
}

// installOperatorSpecPolicy installs the shipped operator spec policy and waits until the API
// server enforces it on a probe APIKey; it returns the operator's configuration, or why not.
func installOperatorSpecPolicy() (*rest.Config, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	policy, binding, err := readShippedPolicy("operator_spec_policy.yaml")
	if err != nil {
		return nil, err.Error()
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Sprintf("installing %s: %v", obj.GetName(), err)
		}
	}
	cfg, err := env.User(shippedOperator, "system:masters")
	if err != nil {
		return nil, err.Error()
	}
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err.Error()
	}
	probe := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "operator-spec-policy-probe"}}
	if err := env.Client.Create(ctx, probe); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Sprintf("creating the probe APIKey: %v", err)
	}
	// The API server compiles policies in the background: a refused probe says it is in force.
	for {
		patch := fmt.Sprintf(`{"spec":{"description":"probe %d"}}`, time.Now().UnixNano())
		err := as.Patch(ctx, probe.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		switch {
		case err != nil && strings.Contains(err.Error(), operatorSpecRefused):
			return cfg, ""
		case err != nil && !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err):
			return nil, fmt.Sprintf("probing the operator spec policy: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Sprintf("the operator spec policy was not enforced within a minute (last: %v)", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startOperatorAs is startOperator with the operator's client configuration cfg.
func startOperatorAs(t *testing.T, cfg *rest.Config, clk *clocktesting.FakeClock, system string, namespaces ...string) *operatorRun {
	t.Helper()
	if clk == nil {
		clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	}
	run := &operatorRun{clock: clk, logs: &logSink{}, system: system}
	mgr, err := operator.NewManager(cfg, operator.Options{
		SystemNamespace:              system,
		RevealTTL:                    revealTTL,
		Logger:                       funcr.New(run.logs.add, funcr.Options{Verbosity: 10, LogTimestamp: true}),
		Clock:                        clk,
		Namespaces:                   namespaces,
		SkipControllerNameValidation: true,
	})
	if err != nil {
		t.Fatalf("creating the operator: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	run.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the operator stopped with an error: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		run.stop()
		// Whatever the test asserted: an operator that tried to change a spec fails it.
		for _, line := range strings.Split(run.logs.all(), "\n") {
			if strings.Contains(line, operatorSpecRefused) {
				t.Errorf("the operator tried to change the spec of an APIKey or a Connection: %s", line)
				break
			}
		}
	})
	// Measurements and fake-clock steps start from a running operator with synced caches.
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("the operator's cache did not sync")
	}
	return run
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it returns nil or 30 seconds pass.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, cond)
}

// poke changes the APIKey's spec.description so that the operator reconciles it now: requeues
// are timed by the real clock, while these tests move the fake one. (A change of metadata alone
// wakes no reconcile.)
func poke(t *testing.T, obj client.Object) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"description":%q}}`, "poked at "+time.Now().Format(time.RFC3339Nano))
	if err := env.Client.Patch(testCtx(t), obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatalf("poking %s: %v", obj.GetName(), err)
	}
}

// condition returns the condition of type t, or an error naming what is there instead.
func condition(conds []metav1.Condition, condType string) (metav1.Condition, error) {
	for _, c := range conds {
		if c.Type == condType {
			return c, nil
		}
	}
	return metav1.Condition{}, errors.New("no " + condType + " condition yet")
}

// hasCondition returns nil when the condition condType has status and reason.
func hasCondition(conds []metav1.Condition, condType string, status metav1.ConditionStatus, reason string) error {
	c, err := condition(conds, condType)
	if err != nil {
		return err
	}
	if c.Status != status || c.Reason != reason {
		return fmt.Errorf("%s is %s/%s (%s), want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
	}
	return nil
}
