package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/switchboard-dev/switchboard/internal/local/proc"
)

func (c *Cluster) asset(name string) string { return filepath.Join(c.opts.Assets, name) }
func (c *Cluster) pki(name string) string   { return filepath.Join(c.dir, "pki", name) }
func (c *Cluster) kubeconfigOf(id string) string {
	return filepath.Join(c.dir, id+".kubeconfig")
}

// component starts one component inside the namespaces and remembers it.
func (c *Cluster) component(name string, args ...string) (*process, error) {
	p, err := c.spawn(name, c.inside(append([]string{c.asset(name)}, args...)...)...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// controlPlane starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
func (c *Cluster) controlPlane(ctx context.Context) error {
	etcd, err := c.component("etcd",
		"--name=switchboard",
		"--data-dir=/var/lib/etcd",
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://127.0.0.1:2380",
		// A throw-away cluster: speed over durability against power loss.
		"--unsafe-no-fsync=true",
	)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, etcd, http.DefaultTransport, etcdURL+"/health", time.Minute); err != nil {
		return err
	}
	c.progress("etcd ready")

	apiserver, err := c.component("kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--advertise-address="+NodeIP,
		"--bind-address=0.0.0.0",
		"--secure-port="+strconv.Itoa(APIServerPort),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--tls-cert-file="+c.pki("apiserver.crt"),
		"--tls-private-key-file="+c.pki("apiserver.key"),
		"--client-ca-file="+c.pki("ca.crt"),
		"--kubelet-client-certificate="+c.pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+c.pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+c.pki("sa.pub"),
		"--service-account-signing-key-file="+c.pki("sa.key"),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, apiserver, transport, cfg.Host+"/readyz", 2*time.Minute); err != nil {
		return err
	}
	c.progress("kube-apiserver ready")

	kcm := c.kubeconfigOf("kube-controller-manager")
	if _, err := c.component("kube-controller-manager",
		"--kubeconfig="+kcm,
		"--authentication-kubeconfig="+kcm,
		"--authorization-kubeconfig="+kcm,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.pki("sa.key"),
		"--root-ca-file="+c.pki("ca.crt"),
		"--cluster-signing-cert-file="+c.pki("ca.crt"),
		"--cluster-signing-key-file="+c.pki("ca.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--allocate-node-cidrs=false",
		"--profiling=false",
	); err != nil {
		return err
	}
	sched := c.kubeconfigOf("kube-scheduler")
	_, err = c.component("kube-scheduler",
		"--kubeconfig="+sched,
		"--authentication-kubeconfig="+sched,
		"--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--profiling=false",
	)
	return err
}

// node starts containerd, imports the images, and starts the kubelet and kube-proxy.
func (c *Cluster) node(ctx context.Context) error {
	cniConf := filepath.Join(c.dir, "cni")
	registryConf := ""
	if len(c.opts.Registries) > 0 {
		registryConf = filepath.Join(c.dir, "certs.d")
	}
	files := map[string]string{
		filepath.Join(c.dir, "containerd.toml"):           containerdConfig(c.ContainerdSocket(), c.opts.SandboxImage, cniBinDir(), cniConf, registryConf),
		filepath.Join(cniConf, "10-switchboard.conflist"): cniConfig(),
		filepath.Join(c.dir, "kubelet.yaml"):              kubeletConfig(c.dir, c.cgroups.podsRoot(), c.ContainerdSocket()),
		filepath.Join(c.dir, "kube-proxy.yaml"):           kubeProxyConfig(c.kubeconfigOf("kube-proxy")),
	}
	for _, host := range c.opts.Registries {
		files[filepath.Join(registryConf, host, "hosts.toml")] = registryHosts(host)
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
	}
	containerd, err := c.spawn("containerd", c.inside("containerd", "--config", filepath.Join(c.dir, "containerd.toml"))...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, containerd)
	if err := c.waitFor(ctx, containerd, time.Minute, func() error {
		_, err := c.Ctr("version")
		return err
	}); err != nil {
		return err
	}
	c.progress("containerd ready")
	for _, img := range c.opts.Images {
		if _, err := c.Ctr("images", "import", img); err != nil {
			return fmt.Errorf("importing %s: %w", img, err)
		}
	}
	c.progress("imported %d images", len(c.opts.Images))

	if _, err := c.component("kubelet",
		"--config="+filepath.Join(c.dir, "kubelet.yaml"),
		"--kubeconfig="+c.kubeconfigOf("kubelet"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeIP,
	); err != nil {
		return err
	}
	_, err = c.component("kube-proxy", "--config="+filepath.Join(c.dir, "kube-proxy.yaml"))
	return err
}

// waitReady waits until the node is Ready, kube-proxy has synced its rules, and the
// controller manager has made the default ServiceAccount and the root CA ConfigMap every pod
// mounts.
func (c *Cluster) waitReady(ctx context.Context) error {
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kubelet := c.proc("kubelet")
	if err := c.waitFor(ctx, kubelet, 3*time.Minute, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s is not Ready: %s", NodeName, cond.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", NodeName)
	}); err != nil {
		return err
	}
	c.progress("node %s Ready", NodeName)
	if err := c.waitHTTP(ctx, c.proc("kube-proxy"), http.DefaultTransport, "http://127.0.0.1:10256/healthz", 2*time.Minute); err != nil {
		return err
	}
	return c.waitFor(ctx, c.proc("kube-controller-manager"), 2*time.Minute, func() error {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
}

func (c *Cluster) proc(name string) *process {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// waitHTTP polls url from inside the network namespace until it answers 200.
func (c *Cluster) waitHTTP(ctx context.Context, p *process, rt http.RoundTripper, url string, timeout time.Duration) error {
	if t, ok := rt.(*http.Transport); ok {
		t = t.Clone()
		t.DialContext, t.Proxy = c.DialContext, nil
		if t.TLSClientConfig == nil {
			t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		rt = t
	}
	client := &http.Client{Transport: rt, Timeout: 5 * time.Second}
	return c.waitFor(ctx, p, timeout, func() error { return proc.HTTPStatus(ctx, client, url, http.StatusOK) })
}

// waitFor polls cond until it returns nil; it fails early when p exits, and at the timeout,
// with p's log.
func (c *Cluster) waitFor(ctx context.Context, p *process, timeout time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited: %s", p.name, p.describe())
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not ready within %s (%w): %s", p.name, timeout, err, p.describe())
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
