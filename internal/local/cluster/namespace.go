package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// netnsDir is where network namespaces are pinned by name, as `ip netns` does, so that
// `ip netns exec <name> …` enters the cluster's.
const netnsDir = "/run/netns"

// netnsPath is the pin of a cluster's network namespace.
func netnsPath(name string) string { return filepath.Join(netnsDir, name) }

// pinNetns bind-mounts the network namespace of pid at netnsPath(name). Unlike `ip netns add`,
// it makes no shared mount of /run/netns, so unpinning leaves no mount behind.
func pinNetns(name string, pid int) error {
	if err := os.MkdirAll(netnsDir, 0o750); err != nil {
		return err
	}
	pin := netnsPath(name)
	f, err := os.OpenFile(filepath.Clean(pin), os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o400)
	if err != nil {
		return fmt.Errorf("pinning the network namespace: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := unix.Mount("/proc/"+strconv.Itoa(pid)+"/ns/net", pin, "", unix.MS_BIND, ""); err != nil {
		return errors.Join(fmt.Errorf("pinning the network namespace at %s: %w", pin, err), os.Remove(pin))
	}
	return nil
}

// unpinNetns removes the pin; the namespace itself ends with its last process.
func unpinNetns(name string) error {
	pin := netnsPath(name)
	if _, err := os.Stat(pin); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := unix.Unmount(pin, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unpinning the network namespace %s: %w", pin, err)
	}
	if err := os.Remove(pin); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// Leave /run/netns as it was when it was empty before; another user's pins keep it.
	_ = os.Remove(netnsDir)
	return nil
}

// inNetns runs fn on an OS thread that has entered the network namespace pinned at path, so
// that the sockets fn creates belong to it. Go schedules goroutines on threads freely, so the
// goroutine is locked to its thread meanwhile; if the thread cannot return to its namespace it
// stays locked and Go ends it with the goroutine.
func inNetns(path string, fn func() error) error {
	target, err := os.Open(filepath.Clean(path))
	if err != nil {
		return fmt.Errorf("opening the cluster's network namespace: %w", err)
	}
	defer func() { _ = target.Close() }()
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer func() { _ = self.Close() }()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering the cluster's network namespace: %w", err)
	}
	fnErr := fn()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(fnErr, fmt.Errorf("leaving the cluster's network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

// DialContext connects to addr from inside the cluster's network namespace: the way in for
// the test's HTTP and Kubernetes clients, which thereby see what a pod or the node sees
// (ClusterIPs, the API server on 127.0.0.1) and nothing of the host.
func (c *Cluster) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(netnsPath(c.name), func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// Listen opens a listener inside the cluster's network namespace, where the node and its pods
// reach it and the host does not: a test serves what the node pulls (a registry, an index)
// this way, from its own process.
func (c *Cluster) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNetns(netnsPath(c.name), func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}
