package cluster

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The cluster's addresses. They exist only inside its network namespace, so they cannot clash
// with the host's or another cluster's.
const (
	// NodeIP is the node's address, on eth0: the API server advertises it (the
	// endpoint of the `kubernetes` Service) and the kubelet reports it.
	NodeIP = "10.200.0.2"
	// PodCIDR is the range the CNI bridge gives pods.
	PodCIDR = "10.244.0.0/24"
	// ServiceCIDR is the range of ClusterIPs; its first address is the `kubernetes` Service.
	ServiceCIDR = "10.96.0.0/16"
	// KubernetesServiceIP is the ClusterIP of the `kubernetes` Service.
	KubernetesServiceIP = "10.96.0.1"
	// APIServerPort is the API server's port; clients in the namespace reach it on 127.0.0.1.
	APIServerPort = 6443
	// NodeName is the one node's name.
	NodeName = "node-0"

	nodePrefixLen = 24
	etcdURL       = "http://127.0.0.1:2379"
)

// kernelTunables are the host-wide sysctls the kubelet sets at start unless they already have
// these values (vm.overcommit_memory=1, kernel.panic_on_oops=1, …). A test must not change the
// machine's kernel settings, so inside the cluster's mount namespace these files are shadowed
// by files that hold the kubelet's values: it finds them set and writes nothing.
var kernelTunables = []struct{ path, value string }{
	{"vm/overcommit_memory", "1"},
	{"vm/panic_on_oom", "0"},
	{"kernel/panic", "10"},
	{"kernel/panic_on_oops", "1"},
	{"kernel/keys/root_maxkeys", "1000000"},
	{"kernel/keys/root_maxbytes", "25000000"},
}

// namespaceSetup is the shell script run once inside the new mount and network namespaces:
// private /run, /var/lib and /var/log (containerd's and the kubelet's state, pod logs, CNI's
// cache, shim sockets and pod network namespaces all go there and vanish with the mount
// namespace), the shadowed kernel tunables, and the node's network: loopback, and the node's
// address and default route on one end of a veth pair whose other end is in the same
// namespace with no address (the kernel here has no dummy driver), so that a packet for any
// other address finds no neighbour and is dropped there instead of leaving.
func namespaceSetup() string {
	var b strings.Builder
	b.WriteString("set -eu\n")
	for _, dir := range []string{"/run", "/var/lib", "/var/log"} {
		fmt.Fprintf(&b, "mount -t tmpfs -o mode=0755 tmpfs %s\n", dir)
	}
	b.WriteString("mkdir -p /run/switchboard-sysctl\n")
	for _, t := range kernelTunables {
		shadow := "/run/switchboard-sysctl/" + strings.ReplaceAll(t.path, "/", ".")
		fmt.Fprintf(&b, "echo %s > %s\nmount --bind %s /proc/sys/%s\n", t.value, shadow, shadow, t.path)
	}
	fmt.Fprintf(&b, `ip link set lo up
ip link add eth0 type veth peer name eth0-peer
ip addr add %s/%d dev eth0
ip link set eth0-peer up
ip link set eth0 up
ip route add default dev eth0
echo 1 > /proc/sys/net/ipv4/ip_forward
echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables
`, NodeIP, nodePrefixLen)
	return b.String()
}

// containerdConfig is containerd's configuration: its socket in the state dir (so that ctr
// reaches it from outside the mount namespace), the CRI plugin with runc under cgroupfs, the
// locally imported sandbox image, and the CNI bridge. Plugins that only write to the host
// (/opt/containerd) or need other file systems are off. restrict_oom_score_adj keeps every
// container's oom_score_adj at or above containerd's own: where root lacks CAP_SYS_RESOURCE
// (these machines' bounding set has no such capability) no process may lower it, and runc
// would fail to start the sandbox with the -998 CRI gives it.
//
// registryConfigDir, when not empty, is where the CRI plugin reads a hosts.toml per registry
// host (registryHosts), as a node's /etc/containerd/certs.d.
func containerdConfig(socket, sandboxImage, cniBinDir, cniConfDir, registryConfigDir string) string {
	registry := ""
	if registryConfigDir != "" {
		registry = fmt.Sprintf(`  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, registryConfigDir)
	}
	return fmt.Sprintf(`version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
%s`, socket, sandboxImage, cniBinDir, cniConfDir, registry)
}

// registryHosts is the hosts.toml that makes containerd pull from a registry host
// (host[:port]) over plain HTTP: without it containerd speaks HTTPS to any host that is not
// localhost, and a test's in-process registry has no certificate.
func registryHosts(host string) string {
	return fmt.Sprintf(`server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
`, host)
}

// cniConfig is the pod network: one bridge with host-local addresses from PodCIDR.
func cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "switchboard",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, PodCIDR)
}

// kubeletConfig is the kubelet's configuration. cgroupRoot puts every pod's cgroups under the
// cluster's own, which teardown removes. Cgroup v1 is accepted on purpose (failCgroupV1:
// false; these machines have v1 with a v2 hierarchy beside it). Without a cluster DNS, pods
// get no name servers (resolvConf ""), so that none asks the host's. Eviction and image garbage
// collection are off: the imported images cannot be pulled again. Pods are synced every 10 s
// (not 1 min), so that a mounted Secret's change reaches its files within seconds, as the
// suite's renewal test needs.
func kubeletConfig(dir, cgroupRoot, socket string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
readOnlyPort: 0
syncFrequency: 10s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
resolvConf: ""
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard:
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
`, cgroupRoot, socket, filepath.Join(dir, "pki", "ca.crt"))
}

// kubeProxyConfig is kube-proxy's configuration, in iptables mode. The conntrack settings are
// zero so that it leaves the host-wide conntrack sysctls alone (as kind does).
func kubeProxyConfig(kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
clusterCIDR: %s
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, PodCIDR, NodeName)
}
