//go:build cluster

package cluster

import (
	"strings"
	"testing"
)

// testRenewalWindowWebhook: the chart's admission webhook, called by the real API server
// through its Service, with the caBundle the operator replicas filled in: an APIKey whose cron
// window cannot open within its renewal period is refused with the gap named, one whose can is
// admitted, and an APIKey without windows never reaches the webhook.
func testRenewalWindowWebhook(t *testing.T) {
	ns := "windows"
	s.kubectl(t, "create", "namespace", ns)
	apply := func(name, renewBefore, cron string) (string, error) {
		return s.cli(t, `apiVersion: switchboard.dev/v1alpha1
kind: APIKey
metadata:
  name: `+name+`
  namespace: `+ns+`
spec:
  secretName: `+name+`-key
  lifetime: 720h
  renewBefore: `+renewBefore+`
  renewalWindows:
    - cron: "`+cron+`"
      duration: 1h
      timeZone: Europe/Paris
`, "kubectl", "apply", "-f", "-")
	}
	// kubectl's error carries the API server's message (stderr).
	if out, err := apply("weekend-gap", "48h", "0 2 * * 1-5"); err == nil || !strings.Contains(err.Error(), "no renewal window opens between") || !strings.Contains(err.Error(), "2 days 23h") {
		t.Fatalf("a cron window that leaves a 71h gap under a 48h renewal period: %v\n%s", err, out)
	}
	if out, err := apply("weekdays", "96h", "0 2 * * 1-5"); err != nil {
		t.Fatalf("a cron window that opens in time was refused: %v\n%s", err, out)
	}
	s.kubectl(t, "delete", "namespace", ns, "--wait=false")
}
