// Package cluster runs a single-node Kubernetes cluster from parts, with no Docker and no
// kind: etcd, kube-apiserver, kube-controller-manager and kube-scheduler (built from source
// by hack/envtest.sh), Debian's containerd and runc, the kubelet, the CNI bridge plugin and
// kube-proxy. All of it runs inside a network namespace and a mount namespace of its own, so
// that the pod and Service networks, iptables rules, pod mounts and containerd's state exist
// only there and no packet leaves; every process it starts lives in one cgroup, so that Stop
// (or Down, after a crash) removes all of it. test/cluster runs switchboard's chart on it, and
// `make cluster` leaves one running.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options configure a cluster.
type Options struct {
	// Name names the network namespace (`ip netns exec <Name>`) and the cgroups.
	Name string
	// Dir holds the cluster's certificates, configuration, kubeconfigs and logs.
	Dir string
	// Assets holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
	// kube-proxy and kubectl (`make cluster-bins`).
	Assets string
	// Images are OCI layout tarballs imported into containerd before the kubelet starts.
	Images []string
	// SandboxImage is the pause image (one of Images) containerd runs as each pod's sandbox.
	SandboxImage string
	// Registries are registry hosts (host:port) containerd pulls from over plain HTTP, such as
	// one a test serves inside the network namespace with Listen.
	Registries []string
	// Detach lets the cluster outlive this process (`make cluster`); Down stops it.
	Detach bool
	// Progress receives a line per step; nil: none.
	Progress io.Writer
}

// Cluster is a running cluster.
type Cluster struct {
	opts    Options
	name    string
	dir     string
	holder  int // the process that holds the namespaces
	cgroups *cgroups
	procs   []*process
}

// state is what Down needs to find a cluster again, in <dir>/state.json.
type state struct {
	Name     string `json:"name"`
	Owner    int    `json:"owner"`
	Detached bool   `json:"detached"`
}

// Binaries are the Kubernetes commands a cluster needs in Options.Assets.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"}

// hostCommands are the commands a cluster needs on PATH, and the Debian package of each.
var hostCommands = map[string]string{
	"containerd": "containerd", "ctr": "containerd", "runc": "runc", "iptables": "iptables",
	"conntrack": "conntrack", "ip": "iproute2", "nsenter": "util-linux", "unshare": "util-linux",
}

// cniBinDirs are where distributions install the CNI plugins (Debian's first).
var cniBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// Kubeconfig is the path of an admin kubeconfig; it reaches the API server from inside the
// cluster's network namespace (Command, DialContext, `ip netns exec`).
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.dir, "admin.kubeconfig") }

// Name is the cluster's network namespace's name.
func (c *Cluster) Name() string { return c.name }

// ContainerdSocket is containerd's socket, for ctr.
func (c *Cluster) ContainerdSocket() string { return filepath.Join(c.dir, "containerd.sock") }

// Start builds the cluster and returns when the node is Ready, kube-proxy has programmed the
// Services and the controllers have made the default ServiceAccount. When it fails it removes
// what it made, and its error ends with the failing component's log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	// Every path is absolute: entering the mount namespace changes the working directory to /.
	if opts.Assets, err = filepath.Abs(opts.Assets); err != nil {
		return nil, err
	}
	for i, img := range opts.Images {
		if opts.Images[i], err = filepath.Abs(img); err != nil {
			return nil, err
		}
	}
	c := &Cluster{opts: opts, name: opts.Name, dir: dir}
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err == nil {
		return nil, fmt.Errorf("%s already holds a cluster; stop it first (make cluster-down)", dir)
	}
	st := state{Name: c.name, Owner: os.Getpid(), Detached: opts.Detach}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o600); err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, Down(dir))
	}
	return c, nil
}

// check names what is missing before anything is made.
func (c *Cluster) check() error {
	if c.name == "" || strings.ContainsAny(c.name, "/ ") {
		return fmt.Errorf("cluster name %q: want a non-empty name without slashes or spaces", c.name)
	}
	if os.Geteuid() != 0 {
		return errors.New("the cluster needs root: it creates namespaces, cgroups and mounts")
	}
	for _, bin := range Binaries {
		if _, err := os.Stat(filepath.Join(c.opts.Assets, bin)); err != nil {
			return fmt.Errorf("%s is missing in %s: run `make cluster-bins`", bin, c.opts.Assets)
		}
	}
	for cmd, pkg := range hostCommands {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("%s is not on PATH: apt-get install %s", cmd, pkg)
		}
	}
	if cniBinDir() == "" {
		return fmt.Errorf("no CNI bridge plugin in %v: apt-get install containernetworking-plugins", cniBinDirs)
	}
	for _, img := range c.opts.Images {
		if _, err := os.Stat(img); err != nil {
			return fmt.Errorf("image %s: %w (make image pause-image)", img, err)
		}
	}
	for _, host := range c.opts.Registries {
		if host == "" || strings.ContainsAny(host, "/ \"\\") || host == "." || host == ".." {
			return fmt.Errorf("registry %q: want host[:port]", host)
		}
	}
	if n := len(c.ContainerdSocket()); n > 100 {
		return fmt.Errorf("the cluster dir %s is too long for a unix socket path (%d characters)", c.dir, n)
	}
	return nil
}

func cniBinDir() string {
	for _, d := range cniBinDirs {
		if _, err := os.Stat(filepath.Join(d, "bridge")); err == nil {
			return d
		}
	}
	return ""
}

func (c *Cluster) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		_, _ = fmt.Fprintf(c.opts.Progress, "cluster: "+format+"\n", args...)
	}
}

func (c *Cluster) start(ctx context.Context) error {
	var err error
	if c.cgroups, err = findCgroups(c.name); err != nil {
		return err
	}
	if err := c.cgroups.create(); err != nil {
		return err
	}
	if err := c.namespaces(); err != nil {
		return err
	}
	c.progress("namespaces ready (network namespace %s, node %s)", c.name, NodeIP)
	if err := writePKI(c.dir); err != nil {
		return err
	}
	if err := c.controlPlane(ctx); err != nil {
		return err
	}
	if err := c.node(ctx); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

// namespaces starts the holder of the new mount and network namespaces, pins the network
// namespace and sets both up.
func (c *Cluster) namespaces() error {
	holder, err := c.spawn("namespaces", "unshare", "--net", "--mount", "--propagation", "private", "--", "sleep", "infinity")
	if err != nil {
		return err
	}
	c.holder = holder.pid
	c.procs = append(c.procs, holder)
	// unshare execs sleep once the namespaces exist.
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(c.holder) + "/ns/net")
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(c.holder) + "/exe")
		if err == nil && ns != self && strings.HasSuffix(exe, "/sleep") {
			break
		}
		if i == 200 || holder.exited() {
			return fmt.Errorf("the namespaces' holder did not start: %s", holder.describe())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := pinNetns(c.name, c.holder); err != nil {
		return err
	}
	_, err = c.run("sh", "-c", namespaceSetup())
	return err
}

// Stop removes the cluster: see Down.
func (c *Cluster) Stop() error { return Down(c.dir) }

// Down removes the cluster whose state is in dir, whether or not its processes still run:
// it kills every process of its cgroup (the mount namespace and all mounts in it, the pods'
// network namespaces and the iptables rules end with them), removes the cgroups and the
// network namespace's pin, and deletes dir. It does nothing when dir holds no cluster.
func Down(dir string) error {
	b, err := os.ReadFile(filepath.Clean(filepath.Join(dir, "state.json")))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("%s/state.json: %w", dir, err)
	}
	cg, err := findCgroups(st.Name)
	if err != nil {
		return err
	}
	if err := cg.kill(30 * time.Second); err != nil {
		return err
	}
	if err := errors.Join(cg.remove(), unpinNetns(st.Name)); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// Stale reports whether dir holds a cluster whose test process is gone (a crash or a kill
// left it running): neither detached nor owned by a live process.
func Stale(dir string) bool {
	b, err := os.ReadFile(filepath.Clean(filepath.Join(dir, "state.json")))
	if err != nil {
		return false
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil || st.Detached {
		return false
	}
	return errors.Is(syscall.Kill(st.Owner, 0), syscall.ESRCH)
}

// RESTConfig is an admin client configuration whose connections are made inside the
// cluster's network namespace.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.Dial = c.DialContext
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// HTTPClient is an HTTP client whose connections are made inside the cluster's network
// namespace: it reaches ClusterIPs as a pod would.
func (c *Cluster) HTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = c.DialContext
	t.Proxy = nil
	return &http.Client{Transport: t, Timeout: 10 * time.Second}
}

// Command is a client command (kubectl, helm, …) run inside the cluster's network namespace
// with the admin kubeconfig: the namespace's 127.0.0.1 is the API server, and ClusterIPs work.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := append([]string{"--net=" + netnsPath(c.name), "--", name}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", argv...) //nolint:gosec // the caller's client command, by design
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig())
	return cmd
}

// Ctr runs ctr against the cluster's containerd in the namespace Kubernetes uses.
func (c *Cluster) Ctr(args ...string) ([]byte, error) {
	return c.run(append([]string{"ctr", "--address", c.ContainerdSocket(), "--namespace", "k8s.io"}, args...)...)
}

// Logs lists the components' log files.
func (c *Cluster) Logs() []string {
	var logs []string
	for _, p := range c.procs {
		logs = append(logs, p.logPath)
	}
	return logs
}
