package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/local/proc"
)

// StartControllerManager runs kube-controller-manager (built by `make envtest-tests` beside
// kube-apiserver) against the control plane with only the named controllers, for example
// "clusterrole-aggregation", which fills the rules of the built-in view, edit and admin roles
// from the ClusterRoles aggregated into them. envtest runs no controllers of its own. The
// process serves nothing (no secure port, no leader election) and is stopped when the test
// ends; the end of its output is in the test log when it dies early or the test fails.
func (e *Env) StartControllerManager(t testing.TB, controllers ...string) {
	t.Helper()
	if len(controllers) == 0 {
		t.Fatal("testenv: name the kube-controller-manager controllers to run")
	}
	bin := filepath.Join(AssetsDir(), "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("testenv: %s missing: run `make envtest-tests` first: %v", bin, err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kube-controller-manager.kubeconfig")
	if err := WriteKubeconfig(e.Config, e.Config.Host, "", kubeconfig); err != nil {
		t.Fatalf("testenv: writing the kube-controller-manager kubeconfig: %v", err)
	}
	cmd := exec.Command(bin, //nolint:gosec // the control plane's own binary, with this helper's flags
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
	)
	p, err := proc.Start(cmd, proc.Options{Name: "kube-controller-manager"})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Err(); err != nil {
			t.Errorf("testenv: %v", err)
		}
		if t.Failed() {
			t.Logf("kube-controller-manager, last lines:\n%s", p.Tail(40))
		}
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("testenv: stopping kube-controller-manager: %v", err)
		}
	})
	// A bad flag or an unreachable API server ends the process at once: report that here
	// rather than as a wait that times out.
	select {
	case <-p.Done():
		t.Fatalf("testenv: %v", p.Err())
	case <-time.After(time.Second):
	}
}
