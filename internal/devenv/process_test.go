package devenv

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestChildStop(t *testing.T) {
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
			c, err := startChild("test", "/bin/sh", filepath.Join(t.TempDir(), "log"), "-c", tt.script)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // let the shell install its trap
			pgid := c.cmd.Process.Pid
			if err := c.stop(500 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if !c.exited() {
				t.Fatal("stop returned with the process still running")
			}
			// Nothing of the group is left: kill(-pgid, 0) finds no process.
			deadline := time.Now().Add(2 * time.Second)
			for syscall.Kill(-pgid, 0) == nil {
				if time.Now().After(deadline) {
					t.Fatal("a process of the child's group outlived stop")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func TestWaitHTTPReportsAnExitedProcess(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "log")
	c, err := startChild("broken", "/bin/sh", logPath, "-c", "echo cannot open the data dir >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	err = waitHTTP(t.Context(), c, http.DefaultClient, "http://127.0.0.1:1/health", 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "broken exited") || !strings.Contains(err.Error(), "cannot open the data dir") {
		t.Fatalf("waitHTTP = %v, want the exit and the log's tail", err)
	}
}
