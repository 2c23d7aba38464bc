// Package proc runs the child processes of switchboard's tools (`switchboard dev`, the bench,
// the fault and end-to-end suites) one way: each in its own process group, so that a terminal's
// Ctrl-C reaches only the parent and stop reaches the child's own children too; with a
// parent-death signal, so that it dies with its parent even when the parent is killed outright;
// with its output kept; stopped with SIGTERM and, after a grace, SIGKILL; and, when it dies, reported
// with the end of its output.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Options say where a child's output goes.
type Options struct {
	// Name names the child in errors ("etcd", "server").
	Name string
	// Output receives what the child writes to stdout and stderr, in order. Nil keeps only
	// the tail that errors quote (and LogPath).
	Output io.Writer
	// LogPath, when set, is a file the output is appended to as well (created 0600), and which
	// errors name.
	LogPath string
	// OnLine, when set, is called with each line of output, in order, from one goroutine; it
	// must not block.
	OnLine func(line string)
}

// tailBytes is how much of the output a Process keeps for its error reports.
const tailBytes = 16 << 10

// waitDelay bounds how long Wait waits for the output after the child exits: a grandchild
// that outlives the child with the output still open must not hang its parent.
const waitDelay = 10 * time.Second

// Process is a started child.
type Process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	out     *output
	done    chan struct{}
	err     error // Wait's result, set before done is closed
}

// Start starts cmd with opts. It sets cmd's Stdout, Stderr and SysProcAttr; the rest of cmd
// (Env, Dir, …) is the caller's.
func Start(cmd *exec.Cmd, opts Options) (*Process, error) {
	name := opts.Name
	if name == "" {
		name = cmd.Path
	}
	out := &output{to: opts.Output, onLine: opts.OnLine}
	var logFile *os.File
	if opts.LogPath != "" {
		f, err := os.OpenFile(filepath.Clean(opts.LogPath), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
		logFile = f
		if out.to == nil {
			out.to = f
		} else {
			out.to = io.MultiWriter(f, out.to)
		}
	}
	closeLog := func() {
		if logFile != nil {
			_ = logFile.Close()
		}
	}
	// One writer for both streams: exec then uses one pipe, so the output keeps its order.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		closeLog()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{name: name, logPath: opts.LogPath, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		out.flush()
		closeLog()
		p.err = err
		close(p.done)
	}()
	return p, nil
}

// Name is the child's name in errors.
func (p *Process) Name() string { return p.name }

// Pid is the child's process id, which is also its process group's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the child has exited and its output is read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the child has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is nil while the child runs. Once it has exited, Err is an *ExitError naming it, with
// how it ended and the end of its output: a child that exits was expected to run, so any exit
// is news to report.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return &ExitError{Name: p.name, Err: p.err, Tail: p.Tail(15), LogPath: p.logPath}
}

// Tail returns the last n lines of the child's output.
func (p *Process) Tail(n int) string { return p.out.Lines(n) }

// Signal sends sig to the child alone, not to its group: the child is told, and stops its
// own children itself (what a test of that needs).
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling %s: %w", p.name, err)
	}
	return nil
}

// Stop sends SIGTERM to the child's process group and, if it has not exited after grace,
// SIGKILL; it returns once the child has exited. Stopping an exited child does nothing.
func (p *Process) Stop(grace time.Duration) error {
	if p == nil || p.Exited() {
		return nil
	}
	if err := p.signalGroup(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	return p.Kill()
}

// Kill sends SIGKILL to the child's process group, as a crash or a node loss would, and
// returns once the child has exited.
func (p *Process) Kill() error {
	if p == nil {
		return nil
	}
	err := p.signalGroup(syscall.SIGKILL)
	<-p.done
	return err
}

func (p *Process) signalGroup(sig syscall.Signal) error {
	if err := syscall.Kill(-p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sending %s to %s: %w", sig, p.name, err)
	}
	return nil
}

// WaitUntil polls ready every interval until it returns nil, the child exits (then the error
// is Err), ctx ends, or timeout passes (then the error names ready's last error and quotes
// the child's output).
func (p *Process) WaitUntil(ctx context.Context, timeout, interval time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		last := ready(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.Err()
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s did not become ready within %s (last: %w); the end of its output%s:\n%s", p.name, timeout, last, p.seeLog(), p.Tail(15))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// WaitHTTP waits, as WaitUntil does, until url answers 200 through c.
func (p *Process) WaitHTTP(ctx context.Context, c *http.Client, url string, timeout time.Duration) error {
	return p.WaitUntil(ctx, timeout, 100*time.Millisecond, func(ctx context.Context) error {
		return HTTPStatus(ctx, c, url, http.StatusOK)
	})
}

// HTTPStatus returns nil when GET url answers want through c, else what it answered.
func HTTPStatus(ctx context.Context, c *http.Client, url string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("GET %s answered %s, want %d", url, resp.Status, want)
	}
	return nil
}

func (p *Process) seeLog() string { return seeLog(p.logPath) }

func seeLog(path string) string {
	if path == "" {
		return ""
	}
	return " (all of it in " + path + ")"
}

// ExitError reports a child that exited.
type ExitError struct {
	// Name is the child's name.
	Name string
	// Err is how it ended: nil for exit status 0, else Wait's error (*exec.ExitError, …).
	Err error
	// Tail is the end of its output.
	Tail string
	// LogPath is the file with all of its output, if any.
	LogPath string
}

func (e *ExitError) Error() string {
	how := "with status 0"
	if e.Err != nil {
		how = "(" + e.Err.Error() + ")"
	}
	if e.Tail == "" {
		return fmt.Sprintf("%s exited %s and wrote nothing", e.Name, how)
	}
	return fmt.Sprintf("%s exited %s; the end of its output%s:\n%s", e.Name, how, seeLog(e.LogPath), e.Tail)
}

// Unwrap returns how the child ended.
func (e *ExitError) Unwrap() error { return e.Err }

// output is the child's stdout and stderr: passed on, split into lines, and its tail kept.
type output struct {
	Tail
	to     io.Writer
	onLine func(string)

	partial []byte // an unfinished line, for onLine; only the one writing goroutine uses it
}

func (o *output) Write(b []byte) (int, error) {
	_, _ = o.Tail.Write(b)
	if o.onLine != nil {
		o.partial = append(o.partial, b...)
		for {
			i := bytes.IndexByte(o.partial, '\n')
			if i < 0 {
				break
			}
			o.onLine(string(o.partial[:i]))
			o.partial = o.partial[i+1:]
		}
	}
	if o.to != nil {
		return o.to.Write(b)
	}
	return len(b), nil
}

// flush hands on an unfinished last line.
func (o *output) flush() {
	if o.onLine != nil && len(o.partial) > 0 {
		o.onLine(string(o.partial))
		o.partial = nil
	}
}

// Tail keeps the end (16 KiB) of what is written to it, for errors that quote the end of a
// process's output. The zero value is ready; it is safe for concurrent use.
type Tail struct {
	mu   sync.Mutex
	last []byte
}

// Write keeps the end of b; it never fails.
func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = append(t.last, b...)
	if len(t.last) > tailBytes {
		t.last = append(t.last[:0], t.last[len(t.last)-tailBytes:]...)
	}
	return len(b), nil
}

// Lines returns the last n lines written.
func (t *Tail) Lines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimRight(t.last, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
