//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
)

// release is the Helm release's name; with it the chart's objects are named switchboard-*.
const release = "switchboard"

// chart is the release's chart as helm install and upgrade name it: in the registry, at the
// release's version, over plain HTTP (the registry is on the namespace's loopback).
func (s *suite) chart() []string {
	return []string{"oci://" + localRegistry + "/charts/switchboard", "--version", strings.TrimPrefix(releaseVersion, "v"), "--plain-http"}
}

// helmInstallArgs are the suite's values with the release's image by digest, from the registry.
func (s *suite) helmInstallArgs() []string {
	return append([]string{"--namespace", systemNamespace, "--set", "image.repository=" + s.imageRepo, "--set", "image.digest=" + s.digest}, s.helmValues()...)
}

// helmValues are the suite's values but the image, and helm's wait.
func (s *suite) helmValues() []string {
	return []string{
		// Both authorization listeners, so that gateways' checks go through the Service too, behind
		// the NetworkPolicy (on by default since issue 39; named here for the previous release,
		// whose default was off), which then needs the gateways named: the suite's call from the
		// node, which the node's CNI (bridge) does not filter anyway.
		"--set", "server.authz.grpc.enabled=true", "--set", "server.authz.http.enabled=true",
		"--set", "networkPolicy.enabled=true", "--set", "server.authz.allowedClients[0].ipBlock.cidr=0.0.0.0/0",
		// testRenewalUnderLoad renews a key every 30 s, under the default minimum interval
		// between renewals (the larger of 5m and 10% of the lifetime).
		"--set", "operator.minRenewalInterval=" + renewalMinInterval.String(),
		"--wait", "--timeout", "4m"}
}

// testInstall installs the release's chart from the registry as docs/operating.md says, its image
// by digest: the operator, the /v1 server and the panel, two replicas each, pulled by the node.
func testInstall(t *testing.T) {
	start := time.Now()
	args := append(append([]string{"install", release}, s.chart()...), "--create-namespace")
	s.must(t, "", s.helm, append(args, s.helmInstallArgs()...)...)
	t.Logf("helm install --wait returned after %s", time.Since(start).Round(100*time.Millisecond))
	for _, name := range []string{"switchboard-operator", "switchboard-server", "switchboard-panel"} {
		d := &appsv1.Deployment{}
		if err := s.k8s.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: name}, d); err != nil {
			t.Fatal(err)
		}
		if d.Status.ReadyReplicas != 2 || d.Status.UpdatedReplicas != 2 {
			t.Fatalf("Deployment %s has %d ready and %d updated replicas, want 2 of each", name, d.Status.ReadyReplicas, d.Status.UpdatedReplicas)
		}
	}
}

// testPodsAsDeclared checks the containers as the kernel runs them, not as the API server
// stores them: the process's user, its root mount, capabilities, seccomp, and the cgroup
// limits that enforce the chart's resources.
func testPodsAsDeclared(t *testing.T) {
	tasks := s.tasks(t)
	for _, component := range []string{"operator", "server", "panel"} {
		pods := s.pods(t, component)
		if len(pods) != 2 {
			t.Fatalf("%d %s pods, want 2", len(pods), component)
		}
		for _, pod := range pods {
			spec := pod.Spec.Containers[0]
			if len(pod.Status.ContainerStatuses) != 1 || !pod.Status.ContainerStatuses[0].Ready {
				t.Fatalf("pod %s: its container is not Ready: %+v", pod.Name, pod.Status.ContainerStatuses)
			}
			if n := pod.Status.ContainerStatuses[0].RestartCount; n != 0 {
				t.Errorf("pod %s: its container restarted %d times", pod.Name, n)
			}
			if err := checkOnDigest(pod.Name, spec.Image, pod.Status.ContainerStatuses[0].ImageID); err != nil {
				t.Error(err)
			}
			id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
			pid, ok := tasks[id]
			if !ok {
				t.Fatalf("pod %s: containerd runs no task %s", pod.Name, id)
			}
			proc := func(file string) string {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
				if err != nil {
					t.Fatalf("pod %s: %v", pod.Name, err)
				}
				return string(b)
			}
			status := proc("status")
			for _, want := range []string{
				"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532",
				"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2",
			} {
				if !strings.Contains(status, want+"\n") {
					t.Errorf("pod %s: the process's /proc status lacks %q:\n%s", pod.Name, want, status)
				}
			}
			checkConfigFile(t, pod.Name, component, pid, proc("cmdline"))
			if opts := rootMountOptions(proc("mountinfo")); !strings.Contains(","+opts+",", ",ro,") {
				t.Errorf("pod %s: the root file system is mounted %q, want read-only", pod.Name, opts)
			}
			memLimit := spec.Resources.Limits.Memory().Value()
			if got := cgroupValue(t, proc("cgroup"), "memory", "memory.limit_in_bytes"); got != memLimit {
				t.Errorf("pod %s: memory.limit_in_bytes is %d, want the chart's limit %d", pod.Name, got, memLimit)
			}
			// The kubelet turns a CPU request into cpu.shares: millicores × 1024 / 1000.
			shares := spec.Resources.Requests.Cpu().MilliValue() * 1024 / 1000
			if got := cgroupValue(t, proc("cgroup"), "cpu", "cpu.shares"); got != shares {
				t.Errorf("pod %s: cpu.shares is %d, want %d for the chart's request of %s", pod.Name, got, shares, spec.Resources.Requests.Cpu())
			}
		}
	}
}

// checkConfigFile checks that the process runs from its configuration file (the chart's
// ConfigMap, mounted): it was started with --config, and the file it sees, read through its own
// root, decodes strictly as its component's configuration and validates.
func checkConfigFile(t *testing.T, pod, component string, pid int, cmdline string) {
	t.Helper()
	const path = "/etc/switchboard/config/config.yaml"
	if !slices.Contains(strings.Split(cmdline, "\x00"), "--config="+path) {
		t.Errorf("pod %s: the process was not started with --config=%s: %q", pod, path, cmdline)
		return
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", pid, path))
	if err != nil {
		t.Errorf("pod %s: %v", pod, err)
		return
	}
	var errs field.ErrorList
	switch component {
	case "server":
		c := &configv1alpha1.ServerConfiguration{}
		if err = config.Decode(data, c); err == nil {
			configv1alpha1.SetDefaults_ServerConfiguration(c)
			errs = config.ValidateServerConfiguration(c)
		}
	case "operator":
		c := &configv1alpha1.OperatorConfiguration{}
		if err = config.Decode(data, c); err == nil {
			configv1alpha1.SetDefaults_OperatorConfiguration(c)
			errs = config.ValidateOperatorConfiguration(c)
		}
	default:
		c := &configv1alpha1.PanelConfiguration{}
		if err = config.Decode(data, c); err == nil {
			configv1alpha1.SetDefaults_PanelConfiguration(c)
			errs = config.ValidatePanelConfiguration(c)
		}
	}
	if err != nil || len(errs) > 0 {
		t.Errorf("pod %s: its configuration file: %v %v\n%s", pod, err, errs.ToAggregate(), data)
	}
}

// tasks maps the container ids of containerd's running tasks to their host pids.
func (s *suite) tasks(t *testing.T) map[string]int {
	t.Helper()
	out, err := s.c.Ctr("tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[string]int{}
	for _, line := range strings.Split(string(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "RUNNING" {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("ctr tasks ls: %q", line)
			}
			tasks[f[0]] = pid
		}
	}
	return tasks
}

// rootMountOptions returns the mount options of "/" in a /proc/<pid>/mountinfo.
func rootMountOptions(mountinfo string) string {
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			return f[5]
		}
	}
	return ""
}

// cgroupValue reads one integer file of a process's cgroup in a v1 controller's hierarchy.
func cgroupValue(t *testing.T, procCgroup, controller, file string) int64 {
	t.Helper()
	for _, line := range strings.Split(procCgroup, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.Contains(","+f[1]+",", ","+controller+",") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, f[2], file))
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	t.Fatalf("the process is in no %s cgroup:\n%s", controller, procCgroup)
	return 0
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// testPanel signs in to the panel through its Service with a ServiceAccount token, as a
// person with a browser would, and uses the session on the requests that follow: whichever
// server pod answers must know it.
func testPanel(t *testing.T) {
	ctx := context.Background()
	base := s.serviceURL(t, "switchboard-panel")
	s.apply(t, `apiVersion: v1
kind: ServiceAccount
metadata:
  name: panel-user
  namespace: default
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: panel-user
  namespace: default
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: admin
subjects:
  - kind: ServiceAccount
    name: panel-user
    namespace: default
`)
	token := strings.TrimSpace(s.kubectl(t, "create", "token", "panel-user", "-n", "default"))

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	// A new connection per request: kube-proxy may send each to either server pod, as it does a
	// browser's connections over a session.
	browser := s.c.HTTPClient()
	browser.Transport.(*http.Transport).DisableKeepAlives = true
	browser.Jar = jar
	get := func(path string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatalf("GET %s through the panel Service: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		return resp.StatusCode, readAll(t, resp)
	}
	status, body := get("/")
	m := csrfField.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("GET / answered %d without a sign-in form:\n%.500s", status, body)
	}
	form := url.Values{"csrf_token": {m[1]}, "token": {token}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page := readAll(t, resp)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/keys" {
		t.Fatalf("signing in answered %d at %s, want the keys page:\n%.500s", resp.StatusCode, resp.Request.URL.Path, page)
	}
	for i := range 10 {
		status, body := get("/keys?namespace=default")
		if status != http.StatusOK || !strings.Contains(body, "API keys") || strings.Contains(body, `name="token"`) {
			t.Fatalf("request %d after signing in: %d, not the keys page (a server pod that does not know the session?):\n%.300s", i+1, status, body)
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response to %s: %v", resp.Request.URL, err)
	}
	return string(b)
}
