//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/local/proc"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// repoRoot is the module root, two directories above this file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// system is one `switchboard dev` process and what a user needs to talk to it.
type system struct {
	t          *testing.T
	root       string
	stateDir   string
	kubeconfig string
	baseURL    string
	proc       *proc.Process
	out        *proc.Buffer // the dev process's stdout and stderr, as a user's terminal shows them
	stopOnce   sync.Once
	pluginErrs proc.Buffer // stderr of every plugin and kubectl run
	demoKey    string
	bannerKeys []string // the lines of the dev banner that show the demo key, by design
}

func (s *system) bin(name string) string { return filepath.Join(s.root, "bin", name) }

func (s *system) kubectlBin() string { return filepath.Join(testenv.AssetsDir(), "kubectl") }

// startSystem runs `bin/switchboard dev --fresh` on free ports with a temporary state dir, as
// a separate process group, and waits for its `ready` line. Cleanup stops it even when the
// test fails.
func startSystem(t *testing.T) *system {
	t.Helper()
	s := launch(t, filepath.Join(t.TempDir(), "state"), true)
	s.parseBanner(t)
	return s
}

// restartSystem runs `bin/switchboard dev` again on the state dir of a stopped system.
func restartSystem(t *testing.T, stopped *system) *system {
	t.Helper()
	return launch(t, stopped.stateDir, false)
}

func launch(t *testing.T, stateDir string, fresh bool) *system {
	t.Helper()
	s := &system{t: t, root: repoRoot(), stateDir: stateDir, out: &proc.Buffer{}}
	for _, bin := range []string{s.bin("switchboard"), s.bin("kubectl-switchboard"), s.kubectlBin()} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s is missing: run `make build envtest` (make test-e2e does)", bin)
		}
	}
	listen, panel := testenv.FreeAddr(t), testenv.FreeAddr(t)
	s.baseURL = "http://" + listen
	s.kubeconfig = filepath.Join(s.stateDir, "kubeconfig")
	args := []string{"dev", "--state-dir", s.stateDir, "--listen", listen, "--panel-listen", panel, "--assets", filepath.Dir(s.kubectlBin())}
	if fresh {
		args = append(args, "--fresh")
	}
	cmd := exec.Command(s.bin("switchboard"), args...)
	cmd.Dir = s.root
	ready := make(chan struct{})
	var once sync.Once
	p, err := proc.Start(cmd, proc.Options{Name: "switchboard dev", Output: s.out, OnLine: func(line string) {
		if strings.Contains(line, "switchboard dev: ready") {
			once.Do(func() { close(ready) })
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.proc = p
	t.Cleanup(func() { s.stop() })
	select {
	case <-ready:
		// proc calls OnLine before it hands the same bytes to Output: wait for the ready line
		// to reach s.out too, or parseBanner may read it without the banner printed just before.
		testenv.Eventually(t, 10*time.Second, "the ready line in dev's output", func() error {
			if !strings.Contains(s.out.String(), "switchboard dev: ready") {
				return errors.New("not yet")
			}
			return nil
		})
	case <-p.Done():
		t.Fatalf("switchboard dev exited before ready (%v):\n%s", p.Err(), s.out.String())
	case <-time.After(4 * time.Minute):
		t.Fatalf("switchboard dev printed no ready line within 4m:\n%s", s.out.String())
	}
	return s
}

// parseBanner reads the demo key from the lines dev prints for a person.
func (s *system) parseBanner(t *testing.T) {
	t.Helper()
	lines := strings.Split(s.out.String(), "\n")
	for i, line := range lines {
		if strings.Contains(line, "demo key (shown once") && i+1 < len(lines) {
			s.demoKey = strings.TrimSpace(lines[i+1])
			s.bannerKeys = append(s.bannerKeys, lines[i+1])
		}
		if strings.Contains(line, "curl ") && strings.Contains(line, "Authorization: Bearer") {
			s.bannerKeys = append(s.bannerKeys, line)
		}
	}
	if !strings.HasPrefix(s.demoKey, "sb_live_") {
		t.Fatalf("dev printed no demo key:\n%s", s.out.String())
	}
	if len(s.bannerKeys) != 2 || !strings.Contains(s.bannerKeys[1], s.demoKey) {
		t.Fatalf("dev printed no curl line with the demo key:\n%s", s.out.String())
	}
	if !strings.Contains(s.out.String(), "export KUBECONFIG="+s.kubeconfig) {
		t.Fatalf("dev did not print export KUBECONFIG=%s:\n%s", s.kubeconfig, s.out.String())
	}
}

// stop sends SIGTERM (what Ctrl-C does) to dev alone, which must stop its own children; it
// waits, and kills the whole group if dev hangs.
func (s *system) stop() {
	s.stopOnce.Do(func() {
		if err := s.proc.Signal(syscall.SIGTERM); err != nil {
			s.t.Error(err)
		}
		select {
		case <-s.proc.Done():
		case <-time.After(60 * time.Second):
			s.t.Errorf("switchboard dev did not stop within 60s of SIGTERM; killing its process group")
			_ = s.proc.Kill()
		}
	})
}

// strays lists processes still running from the state dir (etcd, kube-apiserver).
func (s *system) strays() []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), s.stateDir) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}

// run runs a command as a user would, with the dev kubeconfig; stderr is kept for the leak scan.
func (s *system) run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(&stderr, &s.pluginErrs)
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func (s *system) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := s.run(t, s.kubectlBin(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// plugin runs kubectl-switchboard with -o json and decodes its answer.
func (s *system) plugin(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, err := s.run(t, s.bin("kubectl-switchboard"), args...)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("kubectl-switchboard %s printed no JSON object (%v):\n%s", strings.Join(args, " "), err, out)
	}
	return m
}

// pluginKey runs a plugin command that issues a key and returns the key.
func (s *system) pluginKey(t *testing.T, args ...string) string {
	t.Helper()
	m := s.plugin(t, args...)
	key, _ := m["key"].(string)
	if !strings.HasPrefix(key, "sb_live_") {
		t.Fatalf("kubectl-switchboard %s returned no key: %v", strings.Join(args, " "), m)
	}
	return key
}
