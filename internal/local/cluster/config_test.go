package cluster

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestParseMountinfo(t *testing.T) {
	tests := []struct {
		name, line      string
		mountPoint, typ string
		ok              bool
	}{
		{"v1 hierarchy", "30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory", "/sys/fs/cgroup/memory", "cgroup", true},
		{"v2 hierarchy, no optional fields", "35 25 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw", "/sys/fs/cgroup/unified", "cgroup2", true},
		{"no separator", "35 25 0:31 / /sys/fs/cgroup/unified rw,relatime", "", "", false},
		{"too short", "35 25 - tmpfs", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mp, typ, ok := parseMountinfo(tt.line)
			if mp != tt.mountPoint || typ != tt.typ || ok != tt.ok {
				t.Errorf("parseMountinfo = %q, %q, %v; want %q, %q, %v", mp, typ, ok, tt.mountPoint, tt.typ, tt.ok)
			}
		})
	}
}

// TestNamespaceSetup checks that every kernel tunable the kubelet would set is shadowed
// before the kubelet starts, and that the node's network has no way out.
func TestNamespaceSetup(t *testing.T) {
	script := namespaceSetup()
	for _, kt := range kernelTunables {
		if !strings.Contains(script, "/proc/sys/"+kt.path+"\n") {
			t.Errorf("the setup does not shadow %s", kt.path)
		}
	}
	for _, want := range []string{"mount -t tmpfs -o mode=0755 tmpfs /run\n", "ip addr add " + NodeIP + "/24 dev eth0\n",
		"ip link add eth0 type veth peer name eth0-peer\n", "ip route add default dev eth0\n"} {
		if !strings.Contains(script, want) {
			t.Errorf("the setup lacks %q", want)
		}
	}
}

// TestComponentConfigs decodes the generated configurations and checks the settings the
// cluster depends on.
func TestComponentConfigs(t *testing.T) {
	var kubelet map[string]any
	if err := yaml.UnmarshalStrict([]byte(kubeletConfig("/state", "/sb/pods", "/state/containerd.sock")), &kubelet); err != nil {
		t.Fatalf("the kubelet configuration is not YAML: %v", err)
	}
	for key, want := range map[string]any{
		"failCgroupV1": false, "cgroupDriver": "cgroupfs", "cgroupRoot": "/sb/pods",
		"containerRuntimeEndpoint": "unix:///state/containerd.sock", "resolvConf": "", "imageGCHighThresholdPercent": float64(100),
	} {
		if kubelet[key] != want {
			t.Errorf("kubelet %s = %v, want %v", key, kubelet[key], want)
		}
	}
	var proxy struct {
		Mode      string         `json:"mode"`
		Conntrack map[string]any `json:"conntrack"`
	}
	if err := yaml.Unmarshal([]byte(kubeProxyConfig("/state/kube-proxy.kubeconfig")), &proxy); err != nil {
		t.Fatal(err)
	}
	if proxy.Mode != "iptables" || proxy.Conntrack["maxPerCore"] != float64(0) {
		t.Errorf("kube-proxy: mode %q, conntrack %v; want iptables and no host-wide conntrack changes", proxy.Mode, proxy.Conntrack)
	}
	var cni struct {
		Plugins []struct {
			Type string `json:"type"`
			IPAM struct {
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(cniConfig()), &cni); err != nil {
		t.Fatalf("the CNI configuration is not JSON: %v", err)
	}
	if cni.Plugins[0].Type != "bridge" || cni.Plugins[0].IPAM.Ranges[0][0].Subnet != PodCIDR {
		t.Errorf("CNI: %+v, want a bridge with addresses from %s", cni.Plugins[0], PodCIDR)
	}
	containerd := containerdConfig("/state/containerd.sock", "localhost/pause:1.0", "/usr/lib/cni", "/state/cni", "")
	for _, want := range []string{`sandbox_image = "localhost/pause:1.0"`, "restrict_oom_score_adj = true", "SystemdCgroup = false",
		`"io.containerd.internal.v1.opt"`, `address = "/state/containerd.sock"`} {
		if !strings.Contains(containerd, want) {
			t.Errorf("the containerd configuration lacks %s", want)
		}
	}
}

// TestRegistryConfig checks containerd's configuration with and without a registry
// configuration directory, and each registry host's hosts.toml: containerd must read the
// directory, and pull from the host over plain HTTP (the cluster suite pulls through them).
func TestRegistryConfig(t *testing.T) {
	const section = `[plugins."io.containerd.grpc.v1.cri".registry]`
	for _, tt := range []struct {
		name, dir string
		want      string // "" : no registry section
	}{
		{"no registries", "", ""},
		{"registries", "/state/certs.d", section + "\n    config_path = \"/state/certs.d\"\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := containerdConfig("/s.sock", "p:1", "/cni", "/conf", tt.dir)
			if tt.want == "" && strings.Contains(got, section) {
				t.Errorf("a registry section without registries:\n%s", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("the configuration lacks %q:\n%s", tt.want, got)
			}
		})
	}
	for _, tt := range []struct {
		host string
		want []string
	}{
		{"10.200.0.2:5000", []string{"server = \"http://10.200.0.2:5000\"\n", "[host.\"http://10.200.0.2:5000\"]\n", "capabilities = [\"pull\", \"resolve\"]\n"}},
		{"registry.test", []string{"server = \"http://registry.test\"\n", "[host.\"http://registry.test\"]\n"}},
	} {
		t.Run(tt.host, func(t *testing.T) {
			got := registryHosts(tt.host)
			for _, want := range tt.want {
				if !strings.Contains(got, want) {
					t.Errorf("hosts.toml for %s lacks %q:\n%s", tt.host, want, got)
				}
			}
		})
	}
}
