package operator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// The key metrics, computed at scrape time from the operator's cache, as cert-manager's
// certificate collector does: nothing is kept between scrapes, and a key deleted is gone from
// the next scrape. Per-key series (namespace and name labels) exist for at most
// --key-metrics-limit keys, the first in namespace/name order, so that a million keys are not a
// million series by accident; the aggregates are always exported, and
// switchboard_apikey_metrics_truncated says when the per-key series are not all there. Every
// operator replica's cache holds every key, so each replica exports the same values: aggregate
// with max, not sum.

var (
	descExpiration = prometheus.NewDesc("switchboard_apikey_expiration_timestamp_seconds",
		"When the APIKey's current key stops being accepted (status.keyNotAfter: its lifetime's end or spec.expiresAt); absent when it does not end on its own.",
		[]string{"namespace", "name"}, nil)
	descRenewal = prometheus.NewDesc("switchboard_apikey_renewal_timestamp_seconds",
		"When the APIKey's current key is renewed into its delivery Secret (status.renewalTime); absent when it is not.",
		[]string{"namespace", "name"}, nil)
	descLastUsed = prometheus.NewDesc("switchboard_apikey_last_used_timestamp_seconds",
		"When the APIKey's key last authenticated a request (status.lastUsedAt); absent when never.",
		[]string{"namespace", "name"}, nil)
	descReady = prometheus.NewDesc("switchboard_apikey_ready_status",
		"The APIKey's Ready condition: 1 for its status (True, False or Unknown), 0 for the others.",
		[]string{"namespace", "name", "condition"}, nil)
	descTruncated = prometheus.NewDesc("switchboard_apikey_metrics_truncated",
		"1 when there are more APIKeys than --key-metrics-limit, so that some have no per-key series.",
		nil, nil)
	descKeys = prometheus.NewDesc("switchboard_apikeys",
		"APIKeys by namespace and state: ready, revoked, expired, pending (anything else: issuing, missing hash, conflict).",
		[]string{"namespace", "state"}, nil)
	descExpiringSoon = prometheus.NewDesc("switchboard_apikeys_expiring_soon",
		"APIKeys whose ExpiringSoon condition is True, by namespace.", []string{"namespace"}, nil)
	descUnused = prometheus.NewDesc("switchboard_apikeys_unused",
		"APIKeys whose Unused condition is True, by namespace.", []string{"namespace"}, nil)
	descScrape = prometheus.NewDesc("switchboard_apikey_metrics_scrape_seconds",
		"Time the last collection of the key metrics took.", nil, nil)
)

// keyCollector collects the key metrics from a cache.
type keyCollector struct {
	mu     sync.Mutex
	reader client.Reader
	limit  int
}

// keys is the one collector registered with controller-runtime's registry; each manager set
// up points it at its cache (one per process outside tests).
var (
	keys         = &keyCollector{}
	registerOnce sync.Once
)

// registerKeyMetrics makes the key metrics read mgr's cache, with per-key series for limit
// APIKeys (0: none).
func registerKeyMetrics(mgr manager.Manager, limit int) error {
	keys.mu.Lock()
	keys.reader, keys.limit = mgr.GetCache(), limit
	keys.mu.Unlock()
	var err error
	registerOnce.Do(func() { err = ctrlmetrics.Registry.Register(keys) })
	return err
}

func (c *keyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descExpiration, descRenewal, descLastUsed, descReady, descTruncated, descKeys, descExpiringSoon, descUnused, descScrape} {
		ch <- d
	}
}

// keyState is the aggregate state of an APIKey.
func keyState(k *switchboardv1alpha1.APIKey) string {
	ready := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady)
	switch {
	case k.Spec.Revoked, ready != nil && ready.Reason == switchboardv1alpha1.ReasonUnusedRevoked:
		return "revoked"
	case ready != nil && ready.Status == "True":
		return "ready"
	case ready != nil && ready.Reason == switchboardv1alpha1.ReasonExpired:
		return "expired"
	}
	return "pending"
}

func (c *keyCollector) Collect(ch chan<- prometheus.Metric) {
	start := time.Now()
	c.mu.Lock()
	reader, limit := c.reader, c.limit
	c.mu.Unlock()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list switchboardv1alpha1.APIKeyList
	// Read only, so the cache's own objects, not copies: a scrape at 20,000 keys would
	// otherwise copy them all.
	if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return // not synced yet (or stopping): no series rather than wrong ones
	}
	items := make([]*switchboardv1alpha1.APIKey, len(list.Items))
	for i := range list.Items {
		items[i] = &list.Items[i]
	}
	slices.SortFunc(items, func(a, b *switchboardv1alpha1.APIKey) int {
		if n := strings.Compare(a.Namespace, b.Namespace); n != 0 {
			return n
		}
		return strings.Compare(a.Name, b.Name)
	})
	type nsCounts struct {
		states               map[string]int
		expiringSoon, unused int
	}
	byNS := map[string]*nsCounts{}
	truncated := 0.0
	for i, k := range items {
		n := byNS[k.Namespace]
		if n == nil {
			n = &nsCounts{states: map[string]int{}}
			byNS[k.Namespace] = n
		}
		n.states[keyState(k)]++
		if meta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon) {
			n.expiringSoon++
		}
		if meta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionUnused) {
			n.unused++
		}
		if i >= limit { // and limit 0: no per-key series, none missing
			if limit > 0 {
				truncated = 1
			}
			continue
		}
		if t := k.Status.KeyNotAfter; t != nil {
			ch <- prometheus.MustNewConstMetric(descExpiration, prometheus.GaugeValue, float64(t.Unix()), k.Namespace, k.Name)
		}
		if t := k.Status.RenewalTime; t != nil {
			ch <- prometheus.MustNewConstMetric(descRenewal, prometheus.GaugeValue, float64(t.Unix()), k.Namespace, k.Name)
		}
		if t := k.Status.LastUsedAt; t != nil {
			ch <- prometheus.MustNewConstMetric(descLastUsed, prometheus.GaugeValue, float64(t.Unix()), k.Namespace, k.Name)
		}
		status := "Unknown"
		if ready := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady); ready != nil {
			status = string(ready.Status)
		}
		for _, s := range []string{"True", "False", "Unknown"} {
			v := 0.0
			if s == status {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, v, k.Namespace, k.Name, s)
		}
	}
	for ns, n := range byNS {
		for _, state := range []string{"ready", "revoked", "expired", "pending"} {
			ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(n.states[state]), ns, state)
		}
		ch <- prometheus.MustNewConstMetric(descExpiringSoon, prometheus.GaugeValue, float64(n.expiringSoon), ns)
		ch <- prometheus.MustNewConstMetric(descUnused, prometheus.GaugeValue, float64(n.unused), ns)
	}
	ch <- prometheus.MustNewConstMetric(descTruncated, prometheus.GaugeValue, truncated)
	ch <- prometheus.MustNewConstMetric(descScrape, prometheus.GaugeValue, time.Since(start).Seconds())
}
