package proc

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func startShell(t *testing.T, name, script string, opts Options) *Process {
	t.Helper()
	opts.Name = name
	p, err := Start(exec.Command("/bin/sh", "-c", script), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

// groupGone waits until no process of the group pgid is left running. A zombie, which only
// waits for init to reap it, counts as gone: kill(-pgid, 0) would still find it.
func groupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		running := runningInGroup(pgid)
		if len(running) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the child's group outlived stop: %v", running)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runningInGroup lists the pids of the processes of group pgid that are not zombies, from /proc.
func runningInGroup(pgid int) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			found = append(found, e.Name())
		}
	}
	return found
}

func TestStop(t *testing.T) {
	tests := []struct {
		name   string
		script string
	}{
		{name: "stops on SIGTERM", script: "sleep 60"},
		// A process that ignores SIGTERM is killed once the grace is over, with its own children.
		{name: "killed after the grace", script: `trap "" TERM; sleep 60 & wait`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startShell(t, "test", tt.script, Options{})
			time.Sleep(100 * time.Millisecond) // let the shell install its trap
			if err := p.Stop(500 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if !p.Exited() {
				t.Fatal("stop returned with the process still running")
			}
			// Nothing of the group is left: kill(-pgid, 0) finds no process.
			groupGone(t, p.Pid())
		})
	}
}

func TestKillEndsTheGroup(t *testing.T) {
	out := &Buffer{}
	p := startShell(t, "test", `trap "" TERM; sleep 60 & echo started; wait`, Options{Output: out})
	waitFor(t, p, out, "started")
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	groupGone(t, p.Pid())
	var exit *exec.ExitError
	if err := p.Err(); !errors.As(err, &exit) || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Err after Kill = %v, want an ExitError saying it was killed", err)
	}
}

// Signal tells the child alone: its own children hear nothing unless it passes the signal on.
func TestSignalReachesTheChildOnly(t *testing.T) {
	out := &Buffer{}
	p := startShell(t, "parent", `(trap 'echo child-term; exit 0' TERM; while :; do sleep 0.05; done) &
child=$!
trap 'echo parent-term; sleep 0.5; kill -KILL $child; exit 0' TERM
echo started
wait`, Options{Output: out})
	waitFor(t, p, out, "started")
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if got := out.String(); !strings.Contains(got, "parent-term") || strings.Contains(got, "child-term") {
		t.Fatalf("output %q: want the parent, and only the parent, to get SIGTERM", got)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal to an exited child = %v, want nil", err)
	}
}

// waitFor waits until the child has written want.
func waitFor(t *testing.T, p *Process, out *Buffer, want string) {
	t.Helper()
	if err := p.WaitUntil(t.Context(), 10*time.Second, 10*time.Millisecond, func(context.Context) error {
		if !strings.Contains(out.String(), want) {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestWaitHTTPReportsAnExitedProcess(t *testing.T) {
	p := startShell(t, "broken", "echo cannot open the data dir >&2; exit 3", Options{})
	err := p.WaitHTTP(t.Context(), http.DefaultClient, "http://127.0.0.1:1/health", 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "broken exited") || !strings.Contains(err.Error(), "cannot open the data dir") {
		t.Fatalf("WaitHTTP = %v, want the exit and the output's tail", err)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("WaitHTTP = %v, want it to wrap the exit status 3", err)
	}
}

func TestOutputLinesAndTail(t *testing.T) {
	var lines []string
	var all strings.Builder
	p := startShell(t, "talker", `for i in 1 2 3 4 5; do echo line $i; done; echo err >&2; printf unfinished`, Options{
		Output: &all,
		OnLine: func(l string) { lines = append(lines, l) },
	})
	<-p.Done()
	want := []string{"line 1", "line 2", "line 3", "line 4", "line 5", "err", "unfinished"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("lines = %q, want %q", lines, want)
	}
	if got := all.String(); got != "line 1\nline 2\nline 3\nline 4\nline 5\nerr\nunfinished" {
		t.Fatalf("output = %q", got)
	}
	if got := p.Tail(2); got != "err\nunfinished" {
		t.Fatalf("Tail(2) = %q", got)
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "talker exited with status 0") {
		t.Fatalf("Err = %v, want an exit with status 0 reported", err)
	}
}

func TestErrNilWhileRunning(t *testing.T) {
	p := startShell(t, "sleeper", "sleep 60", Options{})
	if err := p.Err(); err != nil {
		t.Fatalf("Err of a running child = %v", err)
	}
}
