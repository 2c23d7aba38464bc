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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
func startOperator(t *testing.T, clk *clocktesting.FakeClock, system string, namespaces ...string) *operatorRun {
	t.Helper()
	return startOperatorAs(t, env.Config, clk, system, namespaces...)
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
	t.Cleanup(run.stop)
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
