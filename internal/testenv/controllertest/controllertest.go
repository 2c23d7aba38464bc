// Package controllertest runs switchboard's operator on an envtest control plane for the
// controllers' suites (internal/controller/apikey, internal/controller/connection): a real
// manager, as the operator's ServiceAccount under the shipped admission policy that refuses it
// any spec write, with its logs kept, and the waits and checks those suites share.
package controllertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// RevealTTL is the operator's --reveal-ttl in these suites; the fake clock crosses it.
const RevealTTL = time.Hour

// ShippedOperator is the ServiceAccount config/rbac/operator_spec_policy.yaml names.
const ShippedOperator = "system:serviceaccount:switchboard-system:switchboard-operator"

// OperatorSpecRefused is in the message of that policy, when it refuses a spec write.
const OperatorSpecRefused = "never changes the spec of an APIKey or a Connection"

// LogSink records every log line of one operator, so tests can prove the key never appears.
type LogSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *LogSink) add(prefix, args string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, prefix+" "+args)
}

// All returns every line logged so far.
func (s *LogSink) All() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// Operator is one operator (a real manager) watching a test's namespaces.
type Operator struct {
	// Clock is the operator's clock, which tests move.
	Clock *clocktesting.FakeClock
	// Logs are its log lines.
	Logs *LogSink
	// System is its system namespace.
	System string
	// Stop stops it (once; the test's cleanup stops it otherwise).
	Stop func()
}

// StartOperator runs the operator's manager until the test ends (or Stop is called), watching
// only the given namespaces so that tests running in parallel do not see each other's objects
// (clk nil: a fake clock at the current second). It runs as the operator's ServiceAccount
// under the shipped policy that refuses it any spec write (OperatorConfig).
func StartOperator(t *testing.T, env *testenv.Env, clk *clocktesting.FakeClock, system string, namespaces ...string) *Operator {
	t.Helper()
	return StartOperatorAs(t, OperatorConfig(t, env), clk, system, namespaces...)
}

// StartOperatorAs is StartOperator with the operator's client configuration cfg. Whatever the
// test asserts, it fails if the operator logged a refusal of the spec policy.
func StartOperatorAs(t *testing.T, cfg *rest.Config, clk *clocktesting.FakeClock, system string, namespaces ...string) *Operator {
	t.Helper()
	if clk == nil {
		clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	}
	run := &Operator{Clock: clk, Logs: &LogSink{}, System: system}
	c := testenv.OperatorConfiguration(system)
	c.RevealTTL = &metav1.Duration{Duration: RevealTTL}
	mgr, err := operator.NewManager(c, operator.Deps{
		RESTConfig:                   cfg,
		Logger:                       funcr.New(run.Logs.add, funcr.Options{Verbosity: 10, LogTimestamp: true}),
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
	run.Stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the operator stopped with an error: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		run.Stop()
		for _, line := range strings.Split(run.Logs.All(), "\n") {
			if strings.Contains(line, OperatorSpecRefused) {
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

var (
	operatorIdentity     sync.Once
	operatorIdentityCfg  *rest.Config
	operatorIdentityFail string
)

// OperatorConfig is the client configuration every operator of a suite runs with: the user
// ShippedOperator (in system:masters, so RBAC is not what is tested here), with
// config/rbac/operator_spec_policy.yaml installed on env and enforced, once per test binary.
// Any code path of the operator that changes an APIKey's or a Connection's spec is then refused
// with the policy's message, and the test that took it fails.
func OperatorConfig(t *testing.T, env *testenv.Env) *rest.Config {
	t.Helper()
	operatorIdentity.Do(func() { operatorIdentityCfg, operatorIdentityFail = installOperatorSpecPolicy(env) })
	if operatorIdentityFail != "" {
		t.Fatal(operatorIdentityFail)
	}
	return operatorIdentityCfg
}

// installOperatorSpecPolicy installs the shipped operator spec policy and waits until the API
// server enforces it on a probe APIKey; it returns the operator's configuration, or why not.
func installOperatorSpecPolicy(env *testenv.Env) (*rest.Config, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	policy, binding, err := ReadShippedPolicy("operator_spec_policy.yaml")
	if err != nil {
		return nil, err.Error()
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Sprintf("installing %s: %v", obj.GetName(), err)
		}
	}
	cfg, err := env.User(ShippedOperator, "system:masters")
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
		case err != nil && strings.Contains(err.Error(), OperatorSpecRefused):
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

// ReadShippedPolicy reads a file of config/rbac that holds an admission policy and its binding.
func ReadShippedPolicy(file string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	dir := filepath.Join(testenv.RepoRoot(), "config", "rbac")
	path := filepath.Join(dir, file)
	raw, err := fs.ReadFile(os.DirFS(dir), file)
	if err != nil {
		return nil, nil, err
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for _, into := range []any{policy, binding} {
		if err := dec.Decode(into); err != nil {
			return nil, nil, fmt.Errorf("decoding %s: %w", path, err)
		}
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("%s holds more than a policy and its binding", path)
	}
	return policy, binding, nil
}

// Ctx is a context for one call of a test, cancelled after a minute or when the test ends.
func Ctx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond until it returns nil or 30 seconds pass.
func Eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, cond)
}

// Poke changes the object's spec.description so that the operator reconciles it now: requeues
// are timed by the real clock, while these tests move the fake one. (A change of metadata alone
// wakes no reconcile.)
func Poke(t *testing.T, env *testenv.Env, obj client.Object) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"description":%q}}`, "poked at "+time.Now().Format(time.RFC3339Nano))
	if err := env.Client.Patch(Ctx(t), obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatalf("poking %s: %v", obj.GetName(), err)
	}
}

// Condition returns the condition of type condType, or an error naming what is there instead.
func Condition(conds []metav1.Condition, condType string) (metav1.Condition, error) {
	for _, c := range conds {
		if c.Type == condType {
			return c, nil
		}
	}
	return metav1.Condition{}, errors.New("no " + condType + " condition yet")
}

// HasCondition returns nil when the condition condType has status and reason.
func HasCondition(conds []metav1.Condition, condType string, status metav1.ConditionStatus, reason string) error {
	c, err := Condition(conds, condType)
	if err != nil {
		return err
	}
	if c.Status != status || c.Reason != reason {
		return fmt.Errorf("%s is %s/%s (%s), want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
	}
	return nil
}

// NewConnection is a Connection of provider postgres, pinned to id unless it is "".
func NewConnection(ns, name, id string) *switchboardv1alpha1.Connection {
	return &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       switchboardv1alpha1.ConnectionSpec{ID: id, Provider: "postgres"},
	}
}

// ReadyConnection waits until the Connection has an id and Ready=True, and returns it.
func ReadyConnection(t *testing.T, env *testenv.Env, key client.ObjectKey) *switchboardv1alpha1.Connection {
	t.Helper()
	conn := &switchboardv1alpha1.Connection{}
	Eventually(t, "Connection "+key.String()+" to get its id", func() error {
		if err := env.Client.Get(Ctx(t), key, conn); err != nil {
			return err
		}
		if conn.Status.ID == "" {
			return fmt.Errorf("no id yet")
		}
		if conn.Status.ObservedGeneration != conn.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", conn.Status.ObservedGeneration, conn.Generation)
		}
		return HasCondition(conn.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonIDAssigned)
	})
	return conn
}
