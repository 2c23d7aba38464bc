package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process whose output goes to a log file, and whose Go runtime GC trace
// (GODEBUG=gctrace=1) is parsed for the live heap.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu       sync.Mutex
	gcs      int
	liveHeap int64 // bytes live after the last GC's mark phase
}

// gcLine matches the "4->4->2 MB" part of a gctrace line: heap at GC start, at GC end, live.
var gcLine = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

func startProc(name, logDir string, env []string, bin string, args ...string) (*proc, error) {
	logFile, err := os.Create(filepath.Clean(filepath.Join(logDir, name+".log")))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...) // #nosec G204 -- the bench runs its own binaries.
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	// Its own process group, killed with the bench even if the bench dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer func() { _ = logFile.Close() }()
		p.scan(stderr, logFile)
		_ = cmd.Wait()
	}()
	return p, nil
}

func (p *proc) scan(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		_, _ = fmt.Fprintln(log, line)
		if m := gcLine.FindStringSubmatch(line); m != nil {
			live, _ := strconv.ParseInt(m[3], 10, 64)
			p.mu.Lock()
			p.gcs++
			p.liveHeap = live << 20
			p.mu.Unlock()
		}
	}
}

// gc returns how many GCs have run and the live heap after the last one.
func (p *proc) gc() (int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gcs, p.liveHeap
}

// rss is the resident set size of the process, from /proc.
func (p *proc) rss() (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for %s", p.name)
}

// stop sends SIGTERM to the process group and waits, then kills what is left.
func (p *proc) stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}
