//go:build !unit

package apikey_test

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestSamples: the objects in config/samples are valid and become Ready, as a newcomer
// applying them would see (here in a fresh namespace instead of "demo").
func TestSamples(t *testing.T) {
	t.Parallel()
	ns, system := env.Namespace(t, "samples"), env.Namespace(t, "samples-system")
	startOperator(t, nil, system, ns)

	read := func(file string, into client.Object) {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(raw, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if into.GetNamespace() != "demo" {
			t.Fatalf("%s: namespace %q, want demo", file, into.GetNamespace())
		}
		into.SetNamespace(ns)
		if err := env.Client.Create(testCtx(t), into); err != nil {
			t.Fatalf("applying %s: %v", file, err)
		}
	}
	conn := &switchboardv1alpha1.Connection{}
	read("connection.yaml", conn)
	key := &switchboardv1alpha1.APIKey{}
	read("apikey.yaml", key)

	readyConnection(t, client.ObjectKeyFromObject(conn))
	kt := &keyTest{t: t, ns: ns, system: system}
	got := kt.waitIssued(key, 1)
	if err := hasCondition(got.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealPending); err != nil {
		t.Fatal(err)
	}
}
