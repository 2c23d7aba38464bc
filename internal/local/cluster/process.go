package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// process is one component. The harness does not stop components one by one: teardown kills
// the cluster's cgroup, which holds them and everything they started.
type process struct {
	name    string
	logPath string
	pid     int
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process exits; never, for a detached cluster
}

// exited reports whether the process has ended. A detached process is not waited for: it has
// ended when it is gone from /proc or a zombie there.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
	}
	if p.cmd.Process.Pid > 0 {
		return false // waited for: done tells
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
	if err != nil {
		return true
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return strings.HasPrefix(after, "Z")
}

// describe is the process's state and the end of its log, for errors.
func (p *process) describe() string {
	state := "running"
	if p.exited() {
		state = "exited"
		if p.cmd.ProcessState != nil {
			state += ": " + p.cmd.ProcessState.String()
		}
	}
	return fmt.Sprintf("%s (%s); the end of %s:\n%s", p.name, state, p.logPath, tail(p.logPath, 20))
}

// spawn starts argv as a process in the cluster's cgroup with its output in logs/<name>.log:
// in its own session, so that a terminal's Ctrl-C does not reach it, and unless the cluster is
// detached, with a parent-death signal, so that the cluster dies with the test that made it.
func (c *Cluster) spawn(name string, argv ...string) (*process, error) {
	logPath := filepath.Join(c.dir, "logs", name+".log")
	logFile, err := os.OpenFile(filepath.Clean(logPath), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }()
	cg, err := c.cgroups.open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = cg.Close() }()
	cmd := exec.Command(argv[0], argv[1:]...) //nolint:gosec // the cluster's components, from the assets dir and PATH
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	if !c.opts.Detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	if c.opts.Detach {
		return p, cmd.Process.Release() // which forgets the pid, kept above
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// inside is argv run in the cluster's mount and network namespaces.
func (c *Cluster) inside(argv ...string) []string {
	return append([]string{"nsenter", "--target", strconv.Itoa(c.holder), "--mount", "--net", "--"}, argv...)
}

// run runs argv inside the cluster's namespaces (and cgroup) to completion.
func (c *Cluster) run(argv ...string) ([]byte, error) {
	cg, err := c.cgroups.open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = cg.Close() }()
	full := c.inside(argv...)
	cmd := exec.Command(full[0], full[1:]...) //nolint:gosec // nsenter with the harness's own commands
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%v: %w\n%s", argv, err, out.String())
	}
	return out.Bytes(), nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
