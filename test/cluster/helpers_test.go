//go:build cluster

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// systemNamespace is where the chart is installed, as docs/operating.md shows.
const systemNamespace = "switchboard-system"

// signingNamespace is the chart's namespace of the KeyWebhooks' signing-secret copies (its
// default, webhooks.signingNamespace.name).
const signingNamespace = systemNamespace + "-webhook-signing"

// cli runs a client command inside the cluster's network namespace with the admin kubeconfig,
// kubectl and the plugin on PATH, as a person would from a shell there; stdin may be nil.
func (s *suite) cli(t testing.TB, stdin string, name string, args ...string) (stdout string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := s.c.Command(ctx, name, args...)
	cmd.Env = append(cmd.Env, s.cliEnv()...)
	cmd.Dir = s.root
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String(), nil
}

// cliEnv is the environment of cli's commands: kubectl and the plugin on PATH, and helm's
// registry logins, cache and plugins the suite's, not the user's.
func (s *suite) cliEnv() []string {
	return []string{"PATH=" + filepath.Join(s.root, "bin") + ":" + s.assets + ":" + os.Getenv("PATH"),
		"HELM_CONFIG_HOME=" + filepath.Join(s.work, "helm", "config"), "HELM_CACHE_HOME=" + filepath.Join(s.work, "helm", "cache"),
		"HELM_DATA_HOME=" + filepath.Join(s.work, "helm", "data")}
}

// must runs a client command and fails the test when it fails.
func (s *suite) must(t testing.TB, stdin string, name string, args ...string) string {
	t.Helper()
	out, err := s.cli(t, stdin, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *suite) kubectl(t testing.TB, args ...string) string {
	t.Helper()
	return s.must(t, "", "kubectl", args...)
}

// apply applies YAML with kubectl.
func (s *suite) apply(t testing.TB, manifest string) {
	t.Helper()
	s.must(t, manifest, "kubectl", "apply", "-f", "-")
}

// serviceURL is http://<ClusterIP>:<port> of a Service: clients reach pods only this way,
// through kube-proxy's rules, as a pod in the cluster would.
func (s *suite) serviceURL(t testing.TB, name string) string {
	t.Helper()
	svc := &corev1.Service{}
	if err := s.k8s.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: name}, svc); err != nil {
		t.Fatalf("Service %s: %v", name, err)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ClusterIP == "" {
		t.Fatalf("Service %s is %s with ClusterIP %q, want a ClusterIP Service", name, svc.Spec.Type, svc.Spec.ClusterIP)
	}
	return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
}

// apiResponse is one answer of the /v1 API.
type apiResponse struct {
	status int
	body   []byte
	err    error
}

// errorCode is the code of a JSON error body, "" when there is none.
func (r apiResponse) errorCode() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (r apiResponse) String() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("%d %.200s", r.status, r.body)
}

// listConnections calls GET /v1/connections through base with key ("" sends no header).
func listConnections(ctx context.Context, c *http.Client, base, key string) apiResponse {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/connections", nil)
	if err != nil {
		return apiResponse{err: err}
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return apiResponse{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return apiResponse{status: resp.StatusCode, body: body, err: err}
}

// connectionIDs are the ids of a 200 list response.
func connectionIDs(t testing.TB, r apiResponse) []string {
	t.Helper()
	var list struct {
		Connections []struct {
			ID string `json:"id"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatalf("the list response is not JSON: %v: %s", err, r.body)
	}
	var ids []string
	for _, c := range list.Connections {
		ids = append(ids, c.ID)
	}
	return ids
}

// tenant applies a namespace with one Connection and one APIKey (revealed, not delivered), waits
// until both are Ready, and returns the Connection's id.
func (s *suite) tenant(t testing.TB, ns, keyName string) string {
	t.Helper()
	return s.tenantWith(t, ns, keyName, "")
}

// tenantWith is tenant with more of the APIKey's spec: YAML lines under spec, indented by two.
func (s *suite) tenantWith(t testing.TB, ns, keyName, keySpec string) string {
	t.Helper()
	s.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: switchboard.dev/v1alpha1
kind: Connection
metadata:
  name: warehouse
  namespace: %[1]s
spec:
  displayName: Warehouse
  provider: postgres
---
apiVersion: switchboard.dev/v1alpha1
kind: APIKey
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  description: test/cluster
%[3]s`, ns, keyName, keySpec))
	s.kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=2m", "connection/warehouse", "apikey/"+keyName)
	conn := &switchboardv1alpha1.Connection{}
	if err := s.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "warehouse"}, conn); err != nil {
		t.Fatal(err)
	}
	return conn.Status.ID
}

// claim reveals an APIKey's key with the plugin, as its owner would.
func (s *suite) claim(t testing.TB, ns, name string) string {
	t.Helper()
	key := strings.TrimSpace(s.must(t, "", "kubectl", "switchboard", "key", "reveal", name, "-n", ns))
	if !strings.HasPrefix(key, "sb_live_") {
		t.Fatalf("kubectl switchboard key reveal printed %q, want a key sb_live_…", key)
	}
	return key
}

// readyDeployment waits until a Deployment has rolled out all its replicas.
func (s *suite) readyDeployment(t testing.TB, name string, timeout time.Duration) {
	t.Helper()
	s.kubectl(t, "rollout", "status", "-n", systemNamespace, "deployment/"+name, "--timeout="+timeout.String())
}

// pods lists the running pods of a component (operator or server) in the system namespace.
func (s *suite) pods(t testing.TB, component string) []corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := s.k8s.List(context.Background(), list, client.InNamespace(systemNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": component}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

// diagnose logs what explains a failure: the pods, the recent Events, the pods' logs and
// the ends of the components' logs.
func (s *suite) diagnose(t testing.TB) {
	t.Helper()
	show := func(args ...string) {
		out, err := s.cli(t, "", "kubectl", args...)
		if err != nil {
			out = err.Error()
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	show("get", "pods", "-A", "-o", "wide")
	show("get", "events", "-A", "--sort-by=.lastTimestamp")
	list := &corev1.PodList{}
	if err := s.k8s.List(context.Background(), list, client.InNamespace(systemNamespace)); err == nil {
		for _, p := range list.Items {
			show("logs", "-n", systemNamespace, p.Name, "--tail=30")
		}
	}
	for _, log := range s.c.Logs() {
		b, _ := os.ReadFile(log)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		t.Logf("the end of %s:\n%s", log, strings.Join(lines, "\n"))
	}
}

// eventually is testenv.Eventually.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, what, cond)
}
