package devenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// child is a control-plane process. It runs in its own process group, so that a terminal's
// Ctrl-C reaches only switchboard (which then stops it in order), and with a parent-death
// signal, so that it dies with switchboard even when switchboard is killed outright.
type child struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

func startChild(name, bin, logPath string, args ...string) (*child, error) {
	logFile, err := os.OpenFile(filepath.Clean(logPath), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...) //nolint:gosec // the binaries are the control plane from --assets, chosen by the person running dev
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		_ = logFile.Close()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group and, after grace, SIGKILL.
func (c *child) stop(grace time.Duration) error {
	if c == nil || c.exited() {
		return nil
	}
	pgid := -c.cmd.Process.Pid
	if err := syscall.Kill(pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping %s: %w", c.name, err)
	}
	select {
	case <-c.done:
		return nil
	case <-time.After(grace):
	}
	if err := syscall.Kill(pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s: %w", c.name, err)
	}
	<-c.done
	return nil
}
