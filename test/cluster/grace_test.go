//go:build cluster

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// graceFixed is the rotation's fixed grace in testGraceEndsOnEvidence, and graceQuiet its
// spec.graceEndsWhenUnusedFor (the least allowed, twice the server's lastUsedAt interval).
const (
	graceFixed = time.Hour
	graceQuiet = 2 * time.Minute
)

// testGraceEndsOnEvidence (issue 32, item 3): a Deployment takes its key as an environment
// variable and calls /v1 without pause. The key is rotated with an hour's grace; the old key
// stays accepted while the pod holding it runs (GraceEvidence says which pod). `kubectl
// rollout restart` replaces the pod, its traffic moves to the new key, and the old key's grace
// ends once it has been unused for the quiet period, long before the hour, with not one failed
// request in the old pod or the new one. The tenant lets the operator read its workloads by
// binding switchboard-consumer-reader in its namespace.
func testGraceEndsOnEvidence(t *testing.T) {
	const ns, name = "tenant-g", "grace"
	ctx := context.Background()
	s.tenantWith(t, ns, name, fmt.Sprintf("  secretName: grace-key\n  graceEndsWhenUnusedFor: %s\n", graceQuiet))
	api := s.serviceURL(t, "switchboard-api")
	s.apply(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: switchboard-consumer-reader
  namespace: %[1]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: switchboard-consumer-reader
subjects:
  - kind: ServiceAccount
    name: switchboard-operator
    namespace: %[3]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: api}
  strategy:
    rollingUpdate: {maxUnavailable: 0, maxSurge: 1}
  template:
    metadata:
      labels: {app: api}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 5
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
      containers:
        - name: consumer
          image: localhost/consumer:1.0
          imagePullPolicy: Never
          args: ["-url", "%[2]s/v1/connections", "-key-env", "API_KEY"]
          env:
            - name: API_KEY
              valueFrom:
                secretKeyRef: {name: grace-key, key: apiKey}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
`, ns, api, systemNamespace))
	s.kubectl(t, "rollout", "status", "-n", ns, "--timeout=2m", "deployment/api")
	oldPod := strings.TrimPrefix(strings.TrimSpace(s.kubectl(t, "get", "pods", "-n", ns, "-l", "app=api", "-o", "name")), "pod/")
	oldLogs := s.followLogs(t, ns, oldPod)

	key := &switchboardv1alpha1.APIKey{}
	get := func() *switchboardv1alpha1.APIKey {
		if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, key); err != nil {
			t.Fatal(err)
		}
		return key
	}
	rotatedAt := time.Now()
	s.kubectl(t, "patch", "apikey", name, "-n", ns, "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"rotation":{"requestedAt":%q,"gracePeriod":%q}}}`, rotatedAt.UTC().Format(time.RFC3339Nano), graceFixed))
	eventually(t, time.Minute, "key generation 2", func() error {
		if g := get().Status.KeyGeneration; g != 2 {
			return fmt.Errorf("key generation %d", g)
		}
		return nil
	})
	// The old key goes quiet only when the pod restarts: until then GraceEvidence names it.
	eventually(t, graceQuiet+2*time.Minute, "GraceEvidence holding the old key's grace while its pod runs", func() error {
		c := meta(get().Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence)
		if c == nil || c.Reason != switchboardv1alpha1.ReasonPodsHoldPreviousKey && c.Reason != switchboardv1alpha1.ReasonPreviousKeyInUse {
			return fmt.Errorf("GraceEvidence %+v", c)
		}
		if key.Status.PreviousKeyValidUntil == nil {
			t.Fatal("the old key's grace ended while a pod that took it by env was using it")
		}
		if key.Status.PreviousKeyUse == nil || key.Status.PreviousKeyUse.KeyGeneration != 1 {
			return fmt.Errorf("status.previousKeyUse %+v, want generation 1's use", key.Status.PreviousKeyUse)
		}
		return nil
	})
	t.Logf("during the grace, GraceEvidence: %s", meta(key.Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence).Message)

	restartAt := time.Now()
	s.kubectl(t, "rollout", "restart", "-n", ns, "deployment/api")
	s.kubectl(t, "rollout", "status", "-n", ns, "--timeout=2m", "deployment/api")
	eventually(t, graceQuiet+3*time.Minute, "the old key's grace to end on evidence", func() error {
		get()
		if key.Status.PreviousKeyValidUntil != nil {
			c := meta(key.Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence)
			return fmt.Errorf("the old key is still valid until %v; GraceEvidence %+v", key.Status.PreviousKeyValidUntil, c)
		}
		return nil
	})
	ended := time.Now()
	c := meta(key.Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != switchboardv1alpha1.ReasonConsumersMoved {
		t.Fatalf("the grace ended, but GraceEvidence says %+v", c)
	}
	if ended.Sub(rotatedAt) >= graceFixed {
		t.Fatalf("the grace ended %s after the rotation: at its fixed bound, not on evidence", ended.Sub(rotatedAt))
	}
	t.Logf("the old key's grace ended %s after the rotation (fixed bound %s), %s after the rollout restart",
		ended.Sub(rotatedAt).Round(time.Second), graceFixed, ended.Sub(restartAt).Round(time.Second))

	// Not one failed request: the old pod's whole life, and the new pod's.
	time.Sleep(3 * time.Second)
	newPod := strings.TrimPrefix(strings.TrimSpace(s.kubectl(t, "get", "pods", "-n", ns, "-l", "app=api", "--field-selector=status.phase=Running", "-o", "name")), "pod/")
	newLogs := s.kubectl(t, "logs", "-n", ns, newPod)
	for pod, logs := range map[string]string{oldPod: oldLogs.String(), newPod: newLogs} {
		if strings.Contains(logs, "FAIL") {
			t.Errorf("pod %s had failed requests:\n%s", pod, failures(logs))
		}
		tally := lastTally(logs)
		if !strings.HasSuffix(tally, " failed=0") || strings.HasPrefix(tally, "TALLY ok=0 ") {
			t.Errorf("pod %s's tally: %q", pod, tally)
		}
		t.Logf("pod %s: %s", pod, tally)
	}
	s.kubectl(t, "delete", "namespace", ns, "--wait=false")
}

// meta is the condition condType of conds, nil when absent.
func meta(conds []metav1.Condition, condType string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == condType {
			return &conds[i]
		}
	}
	return nil
}

// lastTally is the last TALLY line of a consumer's log.
func lastTally(logs string) string {
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "TALLY ") {
			return lines[i]
		}
	}
	return ""
}

// syncBuffer is a bytes.Buffer safe to write from one goroutine and read from another.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// followLogs streams pod's log until the pod ends (or the test does), so that the log of a pod
// a rollout deletes is kept.
func (s *suite) followLogs(t *testing.T, ns, pod string) *syncBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	cmd := s.c.Command(ctx, "kubectl", "logs", "-f", "-n", ns, pod)
	cmd.Env = append(cmd.Env, s.cliEnv()...)
	cmd.Dir = s.root
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return out
}
