//go:build !unit

package monitoring

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	ptr "k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/system"
)

// prometheusMade are the series Prometheus writes itself for every target.
var prometheusMade = []string{"up"}

// item4 are the operator's key metrics of issue 23, item 4 (computed at scrape time from the
// operator's cache, internal/operator/metrics.go), which the rules and the dashboard read and
// which were written at the same time as them ("pending item 4" until it landed). The test makes
// keys that have every one of them; one missing fails the test naming item 4, instead of the
// rules silently watching a metric nobody exposes.
var item4 = []string{
	"switchboard_apikey_expiration_timestamp_seconds",
	"switchboard_apikey_renewal_timestamp_seconds",
	"switchboard_apikey_last_used_timestamp_seconds",
	"switchboard_apikey_ready_status",
	"switchboard_apikeys",
	"switchboard_apikeys_expiring_soon",
	"switchboard_apikeys_unused",
	"switchboard_apikey_metrics_truncated",
	"switchboard_apikey_metrics_scrape_seconds",
}

// TestExpressionsNameExposedMetrics starts the operator and the server (system: a real control
// plane, both in this process, each with its metrics endpoint), makes them do what the metrics
// count (a key that expires in 3 days, used so that its lastUsedAt is written, a request with an
// invalid key, a key rotating automatically), scrapes both /metrics, and checks that every metric name the rules and the
// dashboard use is in a scrape. A second key, delivered into a Secret with a lifetime, has a
// renewal time. In this process both endpoints serve controller-runtime's one
// registry, so the scrape cannot tell which of the two exposes a name; the rules' selectors
// (job) do that in a cluster.
func TestExpressionsNameExposedMetrics(t *testing.T) {
	_, rules := renderRules(t)
	exprs := append(ruleExpressions(rules), dashboardExpressions(t)...)
	used := map[string][]string{} // metric name -> where
	for i, names := range metricNames(t, exprs) {
		for _, name := range names {
			used[name] = append(used[name], exprs[i].where)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	ctrllog.SetLogger(logr.Discard())
	operatorMetrics, serverMetrics := testenv.FreeAddr(t), testenv.FreeAddr(t)
	sys, err := system.Start(system.Options{
		// Plain-HTTP metrics: the test scrapes them without a token.
		Operator: func(c *configv1alpha1.OperatorConfiguration, _ *operator.Deps) {
			c.MetricsBindAddress, c.MetricsSecure = &operatorMetrics, ptr.To(false)
		},
		Server: func(c *configv1alpha1.ServerConfiguration) {
			c.MetricsBindAddress, c.MetricsSecure = &serverMetrics, ptr.To(false)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sys.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	ns := sys.Namespace(t, "metrics")
	expiresAt := metav1.NewTime(time.Now().Add(72 * time.Hour))
	issued, err := keyclient.New(sys.Client, keyclient.Options{}).Create(ctx, &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "expiring"},
		Spec:       switchboardv1alpha1.APIKeySpec{ExpiresAt: &expiresAt},
	}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lifetime, renewBefore := metav1.Duration{Duration: 720 * time.Hour}, metav1.Duration{Duration: 168 * time.Hour}
	rotating := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rotating"},
		Spec: switchboardv1alpha1.APIKeySpec{SecretName: "rotating-key",
			APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: &lifetime, RenewBefore: &renewBefore}},
	}
	if err := sys.Client.Create(ctx, rotating); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the rotating key's renewal time", func() error {
		if err := sys.Client.Get(ctx, client.ObjectKeyFromObject(rotating), rotating); err != nil {
			return err
		}
		if rotating.Status.RenewalTime == nil {
			return fmt.Errorf("no renewalTime yet")
		}
		return nil
	})
	testenv.Eventually(t, time.Minute, "the key to authenticate", func() error {
		status, _, err := sys.Connections(ctx, issued.Revealed.Key)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("status %d", status)
		}
		return err
	})
	if status, _, err := sys.Connections(ctx, "sb_live_notakey"); err != nil || status != http.StatusUnauthorized {
		t.Fatalf("a request with an invalid key got %d (%v)", status, err)
	}
	testenv.Eventually(t, time.Minute, "the key's lastUsedAt to be written", func() error {
		var key switchboardv1alpha1.APIKey
		if err := sys.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "expiring"}, &key); err != nil {
			return err
		}
		if key.Status.LastUsedAt == nil {
			return fmt.Errorf("no lastUsedAt yet")
		}
		return nil
	})

	// Scrape until every name used is exposed (the operator's cache follows the API server), or
	// a minute has passed; then judge what is missing.
	var exposed map[string]bool
	missing := func() []string {
		var names []string
		for name := range used {
			if !exposed[name] && !slices.Contains(prometheusMade, name) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		return names
	}
	deadline := time.Now().Add(time.Minute)
	for {
		exposed = map[string]bool{}
		for what, addr := range map[string]string{"operator": operatorMetrics, "server": serverMetrics} {
			names, err := scrape(ctx, addr)
			if err != nil {
				t.Fatalf("scraping the %s: %v", what, err)
			}
			for _, name := range names {
				exposed[name] = true
			}
		}
		if len(missing()) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if !exposed["controller_runtime_reconcile_total"] || !exposed["switchboard_api_requests_total"] {
		t.Fatalf("the scrapes lack the operator's or the server's own metrics: %d names", len(exposed))
	}
	for _, name := range missing() {
		where := strings.Join(used[name], "; ")
		switch {
		case slices.Contains(item4, name):
			t.Errorf("%s (%s), a key metric of issue 23 item 4, is in no scrape of the operator (internal/operator/metrics.go)", name, where)
		default:
			t.Errorf("%s (%s) is in no scrape of the operator or the server", name, where)
		}
	}
	t.Logf("%d metric names used by the rules and the dashboard, %d exposed by the scrapes", len(used), len(exposed))
}

// scrape GETs addr's /metrics in the text format and returns the names of its series: a
// histogram's _bucket, _sum and _count, a summary's _sum and _count, and the family names.
func scrape(ctx context.Context, addr string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status %d: %.200s", resp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	var names []string
	for name, f := range families {
		names = append(names, name)
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names = append(names, name+"_bucket", name+"_sum", name+"_count")
		case dto.MetricType_SUMMARY:
			names = append(names, name+"_sum", name+"_count")
		}
	}
	return names, nil
}
