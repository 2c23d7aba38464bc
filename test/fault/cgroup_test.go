//go:build !unit

package fault

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// memoryRoot is where cgroup v1 mounts its memory controller.
const memoryRoot = "/sys/fs/cgroup/memory"

// memCgroup is a cgroup v1 memory group made for one test: a process in it is killed by the
// kernel's OOM killer once it charges more than the limit, as a container's is.
type memCgroup struct {
	dir string
}

// newMemCgroup makes a memory cgroup limited to limit bytes (swap included, so that a process
// cannot page its way past it). It needs root and cgroup v1's memory controller; the group is
// removed when the test ends, after the processes in it are gone.
func newMemCgroup(t *testing.T, limit int64) *memCgroup {
	t.Helper()
	if _, err := os.Stat(filepath.Join(memoryRoot, "memory.limit_in_bytes")); err != nil {
		t.Fatalf("this test runs the server under a memory limit: it needs root and cgroup v1's memory controller at %s: %v", memoryRoot, err)
	}
	name := fmt.Sprintf("switchboard-fault-%d-%d", os.Getpid(), time.Now().UnixNano())
	cg := &memCgroup{dir: filepath.Join(memoryRoot, name)}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Fatalf("making a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		// rmdir succeeds once the group has no process left; a killed one takes a moment.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := os.Remove(cg.dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("removing the memory cgroup %s: %v", cg.dir, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	cg.write(t, "memory.limit_in_bytes", limit)
	if _, err := os.Stat(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes")); err == nil {
		cg.write(t, "memory.memsw.limit_in_bytes", limit)
	}
	// Count the kernel's socket buffers of the group too (cgroup v2 charges them to the
	// group's memory; v1 counts them apart, once a limit is written).
	cg.write(t, "memory.kmem.tcp.limit_in_bytes", limit)
	if got := cg.value(t, "memory.limit_in_bytes"); got != limit {
		t.Fatalf("the cgroup's limit is %d, want %d", got, limit)
	}
	return cg
}

func (cg *memCgroup) write(t *testing.T, file string, v int64) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(strconv.FormatInt(v, 10)), 0o600); err != nil {
		t.Fatalf("writing %s: %v", file, err)
	}
}

// value reads a file of the group that holds one number.
func (cg *memCgroup) value(t *testing.T, file string) int64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		t.Fatalf("%s holds %q: %v", file, raw, err)
	}
	return n
}

// oomControl returns memory.oom_control's fields: under_oom, and oom_kill (the processes the
// kernel killed in the group).
func (cg *memCgroup) oomControl(t *testing.T) map[string]int64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cg.dir, "memory.oom_control"))
	if err != nil {
		t.Fatalf("reading memory.oom_control: %v", err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			out[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if _, ok := out["oom_kill"]; !ok {
		t.Fatalf("memory.oom_control does not count OOM kills (kernel 4.13 or later does): %q", raw)
	}
	return out
}

// startInCgroup runs bin/switchboard with args inside cg from its first instruction (a shell
// moves itself into the group, then execs the binary), with the kubeconfig and extra
// environment; it is killed when the test ends.
func startInCgroup(t *testing.T, cg *memCgroup, name, kubeconfigPath string, extraEnv []string, args ...string) *process {
	t.Helper()
	shArgs := append([]string{"-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(cg.dir, "cgroup.procs"), switchboardBin}, args...)
	cmd := exec.Command("/bin/sh", shArgs...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfigPath), extraEnv...)
	return startCmd(t, name, cmd)
}

// procStatus reads a kB field of /proc/<pid>/status (VmRSS, VmHWM) in bytes; 0 once the process is gone.
func procStatus(pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}
