//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// renewalLifetime and renewalBefore make a key renew itself 30 s after its issue, every 30 s:
// the old key stays valid for 150 s after each renewal, far longer than the kubelet needs to
// update the mounted Secret (its pods sync every 10 s in the test cluster). The platform's
// default minimum interval between renewals (5m) would refuse it: the suite installs the chart
// with renewalMinInterval, which with the default 10% of the lifetime (18 s) allows it.
const (
	renewalLifetime    = 3 * time.Minute
	renewalBefore      = 150 * time.Second
	renewalMinInterval = 20 * time.Second
)

// testRenewalUnderLoad: a client pod (hack/consumer) reads its key from the delivery Secret
// mounted as a volume before every request, and calls /v1 through the Service continuously
// while the operator renews the key twice on its own. Not one request fails; both renewals
// are Events; the first key is refused from the end of its lifetime.
func testRenewalUnderLoad(t *testing.T) {
	const ns = "tenant-r"
	ctx := context.Background()
	s.tenantWith(t, ns, "consumer", fmt.Sprintf("  secretName: consumer-key\n  lifetime: %s\n  renewBefore: %s\n", renewalLifetime, renewalBefore))
	first := deliveredKey(t, ns, "consumer-key")
	s.issued = append(s.issued, first)
	key := &switchboardv1alpha1.APIKey{}
	if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "consumer"}, key); err != nil {
		t.Fatal(err)
	}
	if key.Status.KeyNotAfter == nil || key.Status.RenewalTime == nil {
		t.Fatalf("the key's end %v and renewal %v are not in its status", key.Status.KeyNotAfter, key.Status.RenewalTime)
	}
	firstEnd := key.Status.KeyNotAfter.Time

	api := s.serviceURL(t, "switchboard-api")
	s.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: consumer
  namespace: %[1]s
spec:
  automountServiceAccountToken: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
  containers:
    - name: consumer
      image: localhost/consumer:1.0
      imagePullPolicy: Never
      args: ["-url", "%[2]s/v1/connections", "-key-file", "/var/run/switchboard/apiKey"]
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: [ALL]
      volumeMounts:
        - name: key
          mountPath: /var/run/switchboard
          readOnly: true
  volumes:
    - name: key
      secret:
        secretName: consumer-key
`, ns, api))
	s.kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=2m", "pod/consumer")
	start := time.Now()
	eventually(t, 3*time.Minute, "two automatic renewals", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "consumer"}, key); err != nil {
			return err
		}
		if key.Status.KeyGeneration < 3 {
			return fmt.Errorf("key generation %d", key.Status.KeyGeneration)
		}
		return nil
	})
	t.Logf("two renewals %s after the consumer started", time.Since(start).Round(time.Second))
	s.issued = append(s.issued, deliveredKey(t, ns, "consumer-key"))
	// The consumer picks the third key up within a pod sync, and keeps calling meanwhile.
	var logs string
	eventually(t, time.Minute, "the consumer using the third key", func() error {
		logs = s.kubectl(t, "logs", "-n", ns, "consumer")
		if n := strings.Count(logs, "\nKEY ") + boolInt(strings.HasPrefix(logs, "KEY ")); n < 3 {
			return fmt.Errorf("the consumer used %d keys", n)
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	logs = s.kubectl(t, "logs", "-n", ns, "consumer")
	if strings.Contains(logs, "FAIL") {
		t.Fatalf("the consumer's requests failed during the renewals:\n%s", failures(logs))
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	tally := ""
	for i := len(lines) - 1; i >= 0 && tally == ""; i-- {
		if strings.HasPrefix(lines[i], "TALLY ") {
			tally = lines[i]
		}
	}
	if !strings.HasSuffix(tally, " failed=0") || strings.HasPrefix(tally, "TALLY ok=0 ") {
		t.Fatalf("the consumer's tally: %q", tally)
	}
	t.Logf("the consumer during two renewals: %s", tally)
	events := s.kubectl(t, "get", "events", "-n", ns, "--field-selector", "reason=KeyRenewed", "-o", "name")
	if n := len(strings.Fields(events)); n < 2 {
		t.Errorf("%d KeyRenewed Events, want 2", n)
	}

	// The first key ends with its lifetime, renewal or not.
	if wait := time.Until(firstEnd); wait > 0 {
		time.Sleep(wait + time.Second)
	}
	spread := s.c.HTTPClient()
	eventually(t, 30*time.Second, "the first key refused after its end", func() error {
		if r := listConnections(ctx, spread, api, first); r.status != http.StatusUnauthorized || r.errorCode() != "API_KEY_INVALID" {
			return fmt.Errorf("%s, want 401 API_KEY_INVALID", r)
		}
		return nil
	})
	if r := listConnections(ctx, spread, api, deliveredKey(t, ns, "consumer-key")); r.status != http.StatusOK {
		t.Errorf("the current key after the first one ended: %s", r)
	}
	s.kubectl(t, "delete", "pod", "-n", ns, "consumer", "--wait=false")
}

// deliveredKey is the key a delivery Secret holds.
func deliveredKey(t testing.TB, ns, name string) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := s.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	return string(secret.Data["apiKey"])
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// failures are the FAIL lines of a consumer's log.
func failures(logs string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(l, "FAIL") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
