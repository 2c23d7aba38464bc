package testenv

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/local/proc"
)

// Redis is a real redis-server (Debian's package; .ci/run installs it) on a loopback port,
// started by a test and stopped when it ends. It keeps nothing on disk.
type Redis struct {
	t    testing.TB
	addr string
	args []string
	p    *proc.Process
}

// StartRedis starts a redis-server with extra arguments (e.g. "--requirepass", "x") on a free
// loopback port. It fails the test when redis-server is not installed: the tests that need it
// are not optional.
func StartRedis(t testing.TB, extra ...string) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (apt-get install -y redis-server; .ci/run does it): %v", err)
	}
	r := &Redis{t: t, addr: FreeAddr(t), args: extra}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Addr is host:port.
func (r *Redis) Addr() string { return r.addr }

// URL is the redis:// URL of the server.
func (r *Redis) URL() string { return "redis://" + r.addr }

// Start starts the server (again, on the same port, after Stop) and waits until it accepts
// connections.
func (r *Redis) Start() {
	r.t.Helper()
	_, port, err := net.SplitHostPort(r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	args := append([]string{
		"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", r.t.TempDir(), "--loglevel", "warning",
	}, r.args...)
	cmd := exec.Command("redis-server", args...) //nolint:gosec // the arguments are this helper's own
	p, err := proc.Start(cmd, proc.Options{Name: "redis-server"})
	if err != nil {
		r.t.Fatal(err)
	}
	r.p = p
	err = p.WaitUntil(context.Background(), 10*time.Second, 10*time.Millisecond, func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", r.addr)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		r.t.Fatal(fmt.Errorf("starting redis-server: %w", err))
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 5 s) and waits until it has exited.
func (r *Redis) Stop() {
	if err := r.p.Stop(5 * time.Second); err != nil {
		r.t.Error(err)
	}
}
