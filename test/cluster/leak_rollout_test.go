//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// testLeakRollout: a namespace opted in to rollouts (examples/leak-rollout-rolebinding.yaml,
// binding the chart's switchboard-rollout) runs a Deployment whose pods read the delivered key
// through a subPath mount, which the kubelet never refreshes. A LeakReport of that key, as the
// receiver writes one, has it refused through the Service, a replacement in the delivery
// Secret, and the Deployment rolled: its new pod reads the new key and its requests succeed.
func testLeakRollout(t *testing.T) {
	const ns, deploy = "tenant-leak", "leaky-consumer"
	ctx := context.Background()
	s.tenantWith(t, ns, "leaky", "  secretName: leaky-key\n")
	leaked := deliveredKey(t, ns, "leaky-key")
	s.issued = append(s.issued, leaked)

	example, err := os.ReadFile(filepath.Join(s.root, "examples", "leak-rollout-rolebinding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	binding := strings.Replace(string(example), "namespace: my-team", "namespace: "+ns, 1)
	binding = strings.Replace(binding, "namespace: switchboard-system", "namespace: "+systemNamespace, 1)
	s.apply(t, binding)

	api := s.serviceURL(t, "switchboard-api")
	s.apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
      containers:
        - name: consumer
          image: localhost/consumer:1.0
          imagePullPolicy: Never
          args: ["-url", "%[3]s/v1/connections", "-key-file", "/var/run/switchboard/apiKey"]
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
          volumeMounts:
            # By subPath: the file is fixed when the container starts; only a restart moves it.
            - name: key
              mountPath: /var/run/switchboard/apiKey
              subPath: apiKey
              readOnly: true
      volumes:
        - name: key
          secret:
            secretName: leaky-key
`, ns, deploy, api))
	s.kubectl(t, "rollout", "status", "-n", ns, "deployment/"+deploy, "--timeout=2m")
	before := podsOf(t, ns, deploy)

	hash := apikey.Sum(leaked).String()
	// The record is the platform's, in the release namespace, which helm uninstall must leave
	// empty; the consumer would only load the later steps.
	t.Cleanup(func() {
		s.kubectl(t, "delete", "-n", systemNamespace, "leakreport", switchboardv1alpha1.LeakReportName(hash), "--ignore-not-found")
		s.kubectl(t, "delete", "-n", ns, "deployment", deploy, "--wait=false", "--ignore-not-found")
	})
	s.apply(t, fmt.Sprintf(`apiVersion: switchboard.dev/v1alpha1
kind: LeakReport
metadata:
  name: %s
  namespace: %s
spec:
  keyHash: %s
  keyHint: %s
  source: GitHubPartner
  url: https://github.com/octo/app/blob/0123abc/config.env
  reportedAt: %s
`, switchboardv1alpha1.LeakReportName(hash), systemNamespace, hash, apikey.Hint(leaked), time.Now().UTC().Format(time.RFC3339)))
	start := time.Now()
	c := s.c.HTTPClient()
	eventually(t, 10*time.Second, "the leaked key refused through the Service", func() error {
		if r := listConnections(ctx, c, api, leaked); r.status != http.StatusUnauthorized {
			return fmt.Errorf("%s, want 401", r)
		}
		return nil
	})
	t.Logf("the leaked key was refused through the Service %s after its LeakReport was applied", time.Since(start).Round(10*time.Millisecond))

	var next string
	eventually(t, 30*time.Second, "a working replacement in the delivery Secret", func() error {
		next = deliveredKey(t, ns, "leaky-key")
		if next == leaked {
			return fmt.Errorf("the delivery Secret still holds the leaked key")
		}
		if r := listConnections(ctx, c, api, next); r.status != http.StatusOK {
			return fmt.Errorf("the replacement: %s", r)
		}
		return nil
	})
	s.issued = append(s.issued, next)

	d := &appsv1.Deployment{}
	eventually(t, 30*time.Second, "the Deployment rolled", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: deploy}, d); err != nil {
			return err
		}
		if d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
			return fmt.Errorf("no restartedAt on its pod template")
		}
		return nil
	})
	s.kubectl(t, "rollout", "status", "-n", ns, "deployment/"+deploy, "--timeout=2m")
	t.Logf("the Deployment rolled out %s after the LeakReport was applied", time.Since(start).Round(100*time.Millisecond))
	var after []string
	eventually(t, time.Minute, "only new pods", func() error {
		after = podsOf(t, ns, deploy)
		for _, p := range after {
			if strings.Contains(strings.Join(before, " "), p) {
				return fmt.Errorf("pod %s of before the leak still runs", p)
			}
		}
		if len(after) != 1 {
			return fmt.Errorf("pods %v", after)
		}
		return nil
	})
	var logs string
	eventually(t, 30*time.Second, "the new pod calling with the new key", func() error {
		logs = s.kubectl(t, "logs", "-n", ns, after[0])
		if !strings.Contains(logs, "KEY "+next[:12]) || !strings.Contains(logs, "TALLY ok=") {
			return fmt.Errorf("logs: %.300s", logs)
		}
		return nil
	})
	if strings.Contains(logs, "KEY "+leaked[:12]) || strings.Contains(logs, "FAIL") {
		t.Fatalf("the new pod used the leaked key or failed:\n%s", logs)
	}

	key := &switchboardv1alpha1.APIKey{}
	if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "leaky"}, key); err != nil {
		t.Fatal(err)
	}
	for _, cond := range key.Status.Conditions {
		if cond.Type == switchboardv1alpha1.ConditionLeaked {
			if want := "1 workload rolled (Deployment/" + deploy + ")"; !strings.Contains(cond.Message, want) {
				t.Errorf("Leaked says %q, not %q", cond.Message, want)
			}
			t.Logf("Leaked: %s", cond.Message)
			return
		}
	}
	t.Error("no Leaked condition")
}

// podsOf names the pods of app in ns that are not being deleted.
func podsOf(t *testing.T, ns, app string) []string {
	t.Helper()
	list := &corev1.PodList{}
	if err := s.k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp.IsZero() {
			out = append(out, p.Name)
		}
	}
	return out
}
