package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroups are the cluster's control groups: one tree named after the cluster in every
// hierarchy. Every process the harness starts is cloned straight into <v2>/<name>/system, and
// the kubelet makes each pod's cgroups under <name>/pods, where runc also puts the containers
// in the v2 hierarchy; so killing <v2>/<name> stops everything the cluster ever ran, shims and
// containers included, even after a crash of the process that started it.
type cgroups struct {
	name string
	v2   string   // mount point of the v2 hierarchy (the whole of /sys/fs/cgroup on a v2-only host)
	v1   []string // mount points of the v1 hierarchies (none on a v2-only host)
}

// findCgroups reads the cgroup mounts from /proc/self/mountinfo.
func findCgroups(name string) (*cgroups, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	cg := &cgroups{name: name}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		mountPoint, fsType, ok := parseMountinfo(sc.Text())
		if !ok || !strings.HasPrefix(mountPoint, "/sys/fs/cgroup") {
			continue
		}
		switch fsType {
		case "cgroup2":
			cg.v2 = mountPoint
		case "cgroup":
			cg.v1 = append(cg.v1, mountPoint)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cg.v2 == "" {
		return nil, errors.New("no cgroup v2 hierarchy is mounted under /sys/fs/cgroup; the cluster harness tracks its processes there")
	}
	return cg, nil
}

// parseMountinfo returns the mount point and file system type of one /proc/self/mountinfo line.
func parseMountinfo(line string) (mountPoint, fsType string, ok bool) {
	before, after, found := strings.Cut(line, " - ")
	fields, rest := strings.Fields(before), strings.Fields(after)
	if !found || len(fields) < 5 || len(rest) < 1 {
		return "", "", false
	}
	return fields[4], rest[0], true
}

func (cg *cgroups) system() string { return filepath.Join(cg.v2, cg.name, "system") }

// podsRoot is the kubelet's cgroupRoot.
func (cg *cgroups) podsRoot() string { return "/" + cg.name + "/pods" }

// create makes <name>/system in the v2 hierarchy and <name>/pods in every hierarchy (the
// kubelet refuses a cgroupRoot that is missing in one).
func (cg *cgroups) create() error {
	if err := os.MkdirAll(cg.system(), 0o750); err != nil {
		return fmt.Errorf("creating the cluster's cgroup: %w", err)
	}
	if len(cg.v1) == 0 {
		// v2 only: the pods' cgroups need the controllers the host delegates to us.
		ctrl, err := os.ReadFile(filepath.Join(cg.v2, "cgroup.subtree_control"))
		if err != nil {
			return err
		}
		var enable []string
		for _, c := range strings.Fields(string(ctrl)) {
			enable = append(enable, "+"+c)
		}
		//nolint:gosec // a cgroupfs path: the hierarchy from /proc/self/mountinfo and the cluster's name
		if err := os.WriteFile(filepath.Join(cg.v2, cg.name, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o600); err != nil {
			return fmt.Errorf("delegating controllers to the cluster's cgroup: %w", err)
		}
	}
	for _, h := range append([]string{cg.v2}, cg.v1...) {
		pods := filepath.Join(h, cg.podsRoot())
		if err := os.MkdirAll(pods, 0o750); err != nil {
			return fmt.Errorf("creating %s: %w", pods, err)
		}
		if filepath.Base(h) == "cpuset" {
			// A new v1 cpuset has no CPUs and no memory nodes until given its parent's.
			for _, dir := range []string{filepath.Join(h, cg.name), pods} {
				for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Clean(filepath.Join(h, file)))
					if err != nil {
						return err
					}
					//nolint:gosec // a cgroupfs path, as above
					if err := os.WriteFile(filepath.Join(dir, file), v, 0o600); err != nil {
						return fmt.Errorf("initializing %s: %w", filepath.Join(dir, file), err)
					}
				}
			}
		}
	}
	return nil
}

// open returns the v2 cgroup the harness clones its processes into.
func (cg *cgroups) open() (*os.File, error) { return os.Open(cg.system()) }

// kill stops every process in the cluster's v2 cgroup tree and waits until it is empty.
func (cg *cgroups) kill(timeout time.Duration) error {
	root := filepath.Join(cg.v2, cg.name)
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// cgroup.kill (Linux 5.14) is atomic against forks; without it, kill pid by pid until empty.
	killFile := filepath.Join(root, "cgroup.kill")
	deadline := time.Now().Add(timeout)
	for {
		if err := os.WriteFile(killFile, []byte("1"), 0o600); err != nil {
			if killErr := killProcs(root); killErr != nil {
				return killErr
			}
		}
		pids, err := procs(root)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of cgroup %s are still alive after %s", pids, root, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procs lists the processes in a cgroup tree.
func procs(root string) ([]int, error) {
	var pids []int
	err := walkCgroup(root, func(p string, d fs.DirEntry) error {
		if d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(filepath.Clean(p)) //nolint:gosec // cgroupfs, which only root writes
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// walkCgroup walks a cgroup tree, which the kernel changes under the walk as processes exit:
// what is gone by the time it is read is passed over.
func walkCgroup(root string, fn func(p string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		return fn(p, d)
	})
}

func killProcs(root string) error {
	pids, err := procs(root)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return nil
}

// remove deletes the cluster's cgroup trees, deepest first, in every hierarchy; kill must have
// emptied them.
func (cg *cgroups) remove() error {
	var errs []error
	for _, h := range append([]string{cg.v2}, cg.v1...) {
		root := filepath.Join(h, cg.name)
		var dirs []string
		err := walkCgroup(root, func(p string, d fs.DirEntry) error {
			if d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			errs = append(errs, rmdirRetry(d))
		}
	}
	return errors.Join(errs...)
}

// rmdirRetry removes an empty cgroup; the kernel may report it busy for a moment after its
// last process exited.
func rmdirRetry(dir string) error {
	var err error
	for range 50 {
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", dir, err)
}
