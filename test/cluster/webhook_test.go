//go:build cluster

package cluster

import (
	"strings"
	"testing"
)

// testRenewalWindowWebhook: the chart's admission webhook, called by the real API server
// through its Service, with the caBundle the operator replicas filled in: an APIKey whose cron
// window cannot open within its renewal period is refused with the gap named, one whose can is
// admitted, and so is one whose lifecycle renews nothing; a lifecycle that renews more often
// than the minimum interval the suite installs (renewalMinInterval) is refused with its numbers
// (issue 29), though it has no window. The webhook runs on the
// chart's real clock, so the test asserts what holds on every day: the refusal and the renewal
// period it names, not the gap, which is the first one from now (internal/operator/keyadmission checks
// the gaps at named instants on an injected clock).
func testRenewalWindowWebhook(t *testing.T) {
	ns := "windows"
	s.kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { s.kubectl(t, "delete", "namespace", ns, "--wait=false") })
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
	// kubectl's error carries the API server's message (stderr). Every weekend leaves a gap of
	// at least 2 days 23h, so some gap of 2 days lies ahead whatever the day; the longest, the
	// weekend the clocks go back, is 3 days: 96h always suffices.
	if out, err := apply("weekend-gap", "48h", "0 2 * * 1-5"); err == nil || !strings.Contains(err.Error(), "no renewal window opens between") ||
		!strings.Contains(err.Error(), "renewal period (2 days)") {
		t.Errorf("a cron window that leaves a 71h gap under a 48h renewal period: %v\n%s", err, out)
	}
	if out, err := apply("weekdays", "96h", "0 2 * * 1-5"); err != nil {
		t.Errorf("a cron window that opens in time was refused: %v\n%s", err, out)
	}
	lifecycle := func(name, fields string) (string, error) {
		return s.cli(t, "apiVersion: switchboard.dev/v1alpha1\nkind: APIKey\nmetadata:\n  name: "+name+"\n  namespace: "+ns+
			"\nspec:\n  secretName: "+name+"-key\n"+fields, "kubectl", "apply", "-f", "-")
	}
	if out, err := lifecycle("storm", "  lifetime: 2m\n  renewBeforePercentage: 99\n"); err == nil ||
		!strings.Contains(err.Error(), "renews the key every 1.2s; this platform renews a key at most every "+renewalMinInterval.String()) {
		t.Errorf("a lifecycle renewing every 1.2s: %v\n%s", err, out)
	}
	if out, err := lifecycle("lifetime-only", "  lifetime: 2m\n"); err != nil {
		t.Errorf("a lifecycle that renews nothing was refused: %v\n%s", err, out)
	}
}
