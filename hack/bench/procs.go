package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	childproc "github.com/switchboard-dev/switchboard/internal/local/proc"
)

// proc is a child process whose output goes to a log file, and whose Go runtime GC trace
// (GODEBUG=gctrace=1) is parsed for the live heap.
type proc struct {
	*childproc.Process

	mu       sync.Mutex
	gcs      int
	liveHeap int64 // bytes live after the last GC's mark phase
}

// gcLine matches the "4->4->2 MB" part of a gctrace line: heap at GC start, at GC end, live.
var gcLine = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

func startProc(name, logDir string, env []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...) // #nosec G204 -- the bench runs its own binaries.
	cmd.Env = append(os.Environ(), env...)
	p := &proc{}
	var err error
	p.Process, err = childproc.Start(cmd, childproc.Options{Name: name, LogPath: filepath.Join(logDir, name+".log"), OnLine: p.scan})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *proc) scan(line string) {
	if m := gcLine.FindStringSubmatch(line); m != nil {
		live, _ := strconv.ParseInt(m[3], 10, 64)
		p.mu.Lock()
		p.gcs++
		p.liveHeap = live << 20
		p.mu.Unlock()
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
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for %s", p.Name())
}

// stop stops the process group: SIGTERM, then SIGKILL after 15 seconds.
func (p *proc) stop() { _ = p.Stop(15 * time.Second) }

// startSelf writes content to fileName in the run's directory and starts this program again as
// process name, with the arguments args gives for that file's path: the bare handlers and
// servers the bench compares switchboard with.
func (r *rig) startSelf(name, fileName string, content []byte, args func(path string) []string) (*proc, error) {
	path := filepath.Join(r.dir, fileName)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startProc(name, r.dir, nil, self, args(path)...)
}
