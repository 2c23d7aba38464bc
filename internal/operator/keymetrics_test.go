//go:build !unit

package operator_test

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"k8s.io/utils/ptr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// series gathers the registry and returns the samples of metric name whose labels include want.
func series(t *testing.T, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// TestKeyMetrics: the key metrics are read from the cache at scrape time: per-key expiration,
// renewal, last use and Ready series, the aggregates by namespace and state, and past
// --key-metrics-limit no per-key series beyond the limit, said by the truncated gauge.
func TestKeyMetrics(t *testing.T) {
	system, ns := env.Namespace(t, "km-system"), env.Namespace(t, "km-tenant")
	startManager(t, testenv.OperatorConfiguration(system), operator.Deps{})
	lifetime := &metav1.Duration{Duration: 30 * 24 * time.Hour}
	for _, name := range []string{"a", "b", "c"} {
		k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		k.Spec.SecretName, k.Spec.Lifetime = name+"-key", lifetime
		k.Spec.RenewBeforePercentage = ptr.To(int32(10))
		if err := env.Client.Create(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	var notAfter *metav1.Time
	testenv.Eventually(t, 30*time.Second, "three ready keys with their ends", func() error {
		var list switchboardv1alpha1.APIKeyList
		if err := env.Client.List(t.Context(), &list); err != nil {
			return err
		}
		ready := 0
		for _, k := range list.Items {
			if k.Namespace == ns && meta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionReady) && k.Status.KeyNotAfter != nil {
				ready++
				if k.Name == "a" {
					notAfter = k.Status.KeyNotAfter
				}
			}
		}
		if ready != 3 {
			return fmt.Errorf("%d ready", ready)
		}
		if got := series(t, "switchboard_apikeys", map[string]string{"namespace": ns, "state": "ready"}); len(got) != 1 || got[0].GetGauge().GetValue() != 3 {
			return fmt.Errorf("switchboard_apikeys{state=ready} %v", got)
		}
		return nil
	})
	exp := series(t, "switchboard_apikey_expiration_timestamp_seconds", map[string]string{"namespace": ns, "name": "a"})
	if len(exp) != 1 || exp[0].GetGauge().GetValue() != float64(notAfter.Unix()) {
		t.Errorf("expiration of a: %v, want %d", exp, notAfter.Unix())
	}
	if got := series(t, "switchboard_apikey_renewal_timestamp_seconds", map[string]string{"namespace": ns, "name": "a"}); len(got) != 1 ||
		got[0].GetGauge().GetValue() != float64(notAfter.Add(-3*24*time.Hour).Unix()) {
		t.Errorf("renewal of a: %v", got)
	}
	if got := series(t, "switchboard_apikey_ready_status", map[string]string{"namespace": ns, "name": "b", "condition": "True"}); len(got) != 1 || got[0].GetGauge().GetValue() != 1 {
		t.Errorf("ready_status of b: %v", got)
	}
	for _, name := range []string{"switchboard_apikeys_expiring_soon", "switchboard_apikeys_unused"} {
		if got := series(t, name, map[string]string{"namespace": ns}); len(got) != 1 || got[0].GetGauge().GetValue() != 0 {
			t.Errorf("%s: %v", name, got)
		}
	}

	// A limit below the number of keys: per-key series for that many, the aggregates still whole.
	c := testenv.OperatorConfiguration(env.Namespace(t, "km-system2"))
	c.KeyMetricsLimit = ptr.To[int32](1)
	startManager(t, c, operator.Deps{})
	testenv.Eventually(t, 30*time.Second, "the limited collection", func() error {
		if got := series(t, "switchboard_apikey_metrics_truncated", nil); len(got) != 1 || got[0].GetGauge().GetValue() != 1 {
			return fmt.Errorf("truncated %v", got)
		}
		if got := series(t, "switchboard_apikey_ready_status", map[string]string{"condition": "True"}); len(got) != 1 {
			return fmt.Errorf("%d keys with a Ready series, want 1", len(got))
		}
		if got := series(t, "switchboard_apikeys", map[string]string{"namespace": ns, "state": "ready"}); len(got) != 1 || got[0].GetGauge().GetValue() != 3 {
			return fmt.Errorf("the aggregate under the limit: %v", got)
		}
		return nil
	})
}
