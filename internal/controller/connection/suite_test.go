//go:build !unit

package connection_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/controllertest"
)

// The Connection controller's suite runs the whole operator (internal/operator) on one envtest
// control plane, as its ServiceAccount under the shipped policy that refuses it any spec write
// (internal/testenv/controllertest).

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

// startOperator runs the operator watching namespaces until the test ends (controllertest).
func startOperator(t *testing.T, clk *clocktesting.FakeClock, system string, namespaces ...string) *controllertest.Operator {
	t.Helper()
	return controllertest.StartOperator(t, env, clk, system, namespaces...)
}

// operatorConfig is the operator's identity, under the shipped spec policy.
func operatorConfig(t *testing.T) *rest.Config {
	t.Helper()
	return controllertest.OperatorConfig(t, env)
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	return controllertest.Ctx(t)
}

// eventually polls cond until it returns nil or 30 seconds pass.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	controllertest.Eventually(t, what, cond)
}

func condition(conds []metav1.Condition, condType string) (metav1.Condition, error) {
	return controllertest.Condition(conds, condType)
}

func newConnection(ns, name, id string) *switchboardv1alpha1.Connection {
	return controllertest.NewConnection(ns, name, id)
}

func readyConnection(t *testing.T, key client.ObjectKey) *switchboardv1alpha1.Connection {
	t.Helper()
	return controllertest.ReadyConnection(t, env, key)
}
