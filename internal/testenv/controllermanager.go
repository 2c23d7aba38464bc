package testenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartControllerManager runs kube-controller-manager (built by `make envtest` beside
// kube-apiserver) against the control plane with only the named controllers, for example
// "clusterrole-aggregation", which fills the rules of the built-in view, edit and admin roles
// from the ClusterRoles aggregated into them. envtest runs no controllers of its own. The
// process serves nothing (no secure port, no leader election) and is stopped when the test
// ends; its output is in the test log on failure.
func (e *Env) StartControllerManager(t testing.TB, controllers ...string) {
	t.Helper()
	if len(controllers) == 0 {
		t.Fatal("testenv: name the kube-controller-manager controllers to run")
	}
	bin := filepath.Join(AssetsDir(), "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("testenv: %s missing: run `make envtest` first: %v", bin, err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kube-controller-manager.kubeconfig")
	if err := WriteKubeconfig(e.Config, e.Config.Host, "", kubeconfig); err != nil {
		t.Fatalf("testenv: writing the kube-controller-manager kubeconfig: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, //nolint:gosec // the control plane's own binary, with fixed flags
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
	)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("testenv: starting kube-controller-manager: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		err := <-done
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || ctx.Err() == nil) {
			t.Errorf("testenv: kube-controller-manager: %v", err)
		}
		if t.Failed() {
			t.Logf("kube-controller-manager output:\n%s", out.String())
		}
	})
	// A bad flag or an unreachable API server ends the process at once: report that here
	// rather than as a wait that times out.
	select {
	case err := <-done:
		done <- err
		t.Fatalf("testenv: kube-controller-manager exited at start (%v):\n%s", err, out.String())
	case <-time.After(time.Second):
	}
}
