//go:build !unit

package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestLeakCatchUpRecordsAMissedAlert: GitHub does not deliver an organization's webhook
// again, so the server, as a ServiceAccount holding the chart's grants (a Lease, LeakReports'
// create), lists the organization's open alerts every period: an alert of an issued key that
// was never delivered is recorded by the next listing, which makes at most its budget of
// requests (newest first). The alert is then remembered: its delivery, if it comes, costs no
// call.
func TestLeakCatchUpRecordsAMissedAlert(t *testing.T) {
	const period = 10 * time.Minute
	ns := env.Namespace(t, "leak-catch-up")
	missed := newKey(t, ns, "missed", switchboardv1alpha1.APIKeySpec{})
	secret, apiToken := []byte("the organization's webhook secret"), "github_pat_test"
	api := newGitHubAPI(t, apiToken)
	api.perPage = 2
	never := func() string {
		k, err := apikey.Generate(apikey.DefaultPrefix)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	api.add("acme/app", 1, never())
	api.add("acme/lib", 1, "ghp_not_our_format")
	clk := clocktesting.NewFakeClock(time.Now())
	cfg := serviceAccountConfig(t, true, withLeakReports, withLeakCatchUp)
	// The secrets in files, as the chart mounts them.
	dir := t.TempDir()
	lr := leakSection("")
	lr.OrganizationAlerts = configv1alpha1.LeakReportsOrganizationAlerts{
		WebhookSecretFile: writeFile(t, dir, "webhook-secret", secret), APITokenFile: writeFile(t, dir, "api-token", []byte(apiToken+"\n")),
		APIBaseURL: api.url, Organization: "acme",
		CatchUp: configv1alpha1.LeakReportsCatchUp{Period: &metav1.Duration{Duration: period}, MaxRequests: ptr.To[int32](2)},
	}
	url := startLeakServer(t, cfg, &sc{LeakReports: lr}, Deps{CatchUpClock: clk})

	// The first listing, once the replica holds the Lease and the index has synced.
	testenv.Eventually(t, 30*time.Second, "the first listing", func() error {
		if n := api.requests("list"); n != 1 || !clk.HasWaiters() {
			return fmt.Errorf("%d listings, waiting for the period: %v", n, clk.HasWaiters())
		}
		return nil
	})
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx(t), client.ObjectKey{Namespace: systemNamespace, Name: leakreceiver.CatchUpLease}, lease); err != nil ||
		lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("the catch-up's Lease: %v %+v", err, lease.Spec)
	}

	// A leak whose delivery is lost, among newer and older alerts: three pages of two.
	api.add("acme/app", 2, missed.Key)
	api.add("acme/app", 3, never())
	api.add("acme/app", 4, never())
	time.Sleep(200 * time.Millisecond)
	if leakReport(t, missed.Key) != nil || api.requests("list") != 1 {
		t.Fatal("the catch-up listed before its period")
	}
	clk.Step(period)
	testenv.Eventually(t, 30*time.Second, "the missed alert recorded by the next listing", func() error {
		if leakReport(t, missed.Key) == nil {
			return fmt.Errorf("no LeakReport yet (%d listing requests)", api.requests("list"))
		}
		return nil
	})
	s := leakReport(t, missed.Key).Spec
	if s.Source != switchboardv1alpha1.LeakSourceGitHubAlert || s.Reference != "acme/app#2" || s.KeyHint != apikey.Hint(missed.Key) ||
		s.URL != "https://github.com/acme/app/security/secret-scanning/2" {
		t.Errorf("the LeakReport says %+v", s)
	}
	testenv.Eventually(t, 30*time.Second, "the listing done", func() error {
		if !clk.HasWaiters() {
			return errors.New("still listing")
		}
		return nil
	})
	// The budget: two requests of the three pages; the oldest alerts wait.
	if n := api.requests("list"); n != 3 {
		t.Errorf("%d listing requests in two listings, want 3 (1, then the budget of 2)", n)
	}
	if n := api.requests("alert"); n != 0 {
		t.Errorf("the listing fetched %d alerts one by one, want none (the list carries the secrets)", n)
	}

	// The alert's delivery, late: answered as recorded, with no call.
	before := api.total()
	status, body := send(t, from("127.0.0.2"), alertDelivery(t, url, secret, "created", "acme/app", 2, "late"))
	if status != http.StatusOK || !strings.Contains(body, `"result":"recorded"`) {
		t.Fatalf("the late delivery: %d %s, want 200 recorded", status, body)
	}
	if n := api.total() - before; n != 0 {
		t.Errorf("the late delivery of an alert the catch-up handled cost %d requests to GitHub's API, want 0", n)
	}
}
