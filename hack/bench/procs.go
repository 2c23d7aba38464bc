package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	childproc "github.com/switchboard-dev/switchboard/internal/local/proc"
	"github.com/switchboard-dev/switchboard/internal/testenv"
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
// process name, with the arguments args gives for a free address and that file's path: the bare
// handlers and servers the bench compares switchboard with. It returns the process and the address.
func (r *rig) startSelf(name, fileName string, content []byte, args func(addr, path string) []string) (*proc, string, error) {
	path := filepath.Join(r.dir, fileName)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		return nil, "", err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	addr, err := testenv.FreeLoopback()
	if err != nil {
		return nil, "", err
	}
	p, err := startProc(name, r.dir, nil, self, args(addr, path)...)
	return p, addr, err
}

// startBare starts the bare handler writing body (written to fileName), with extra of its flags,
// and waits until it answers: what switchboard is compared with. It returns the process and its
// address.
func (r *rig) startBare(ctx context.Context, name, fileName string, body []byte, extra ...string) (*proc, string, error) {
	p, addr, err := r.startSelf(name, fileName, body, func(addr, path string) []string {
		return append([]string{"-bare-listen=" + addr, "-bare-body=" + path}, extra...)
	})
	if err != nil {
		return nil, "", err
	}
	if err := p.WaitHTTP(ctx, http.DefaultClient, "http://"+addr+"/", 10*time.Second); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, addr, nil
}

// startServer starts `switchboard server` as process name against the control plane, on free
// addresses, with args besides, and waits until it is ready. The failure limiter is off (the
// revocation parts make clients fail on purpose, and valid keys, which the throughput parts use,
// never meet it), and so is the shutdown delay. It returns the process and the API's URL.
func (r *rig) startServer(ctx context.Context, name string, args ...string) (*proc, string, error) {
	addrs, err := freeAddrs(2)
	if err != nil {
		return nil, "", err
	}
	api, health := addrs[0], addrs[1]
	p, err := startProc(name, r.dir, r.kenv, r.bin, append([]string{"server", "--listen=" + api, "--health-probe-bind-address=" + health,
		"--auth-failure-rate=0", "--shutdown-delay=0s"}, args...)...)
	if err != nil {
		return nil, "", err
	}
	if err := p.WaitHTTP(ctx, http.DefaultClient, "http://"+health+"/readyz", 60*time.Second); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, "http://" + api, nil
}

// freeAddrs returns n loopback addresses nobody listens on, none of them handed out before.
func freeAddrs(n int) ([]string, error) {
	addrs := make([]string, n)
	for i := range addrs {
		var err error
		if addrs[i], err = testenv.FreeLoopback(); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}
