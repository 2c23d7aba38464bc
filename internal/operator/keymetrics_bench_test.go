package operator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// BenchmarkKeyCollector is one collection of the key metrics at 20,000 keys in 1,000
// namespaces, each with an end, a renewal, a last use and conditions, per-key series for the
// first 10,000 (the default limit). The reader hands out a prepared list without copying, as
// the cache does for UnsafeDisableDeepCopy (a pure unit benchmark).
func BenchmarkKeyCollector(b *testing.B) {
	now := metav1.NewTime(time.Now())
	var objs []switchboardv1alpha1.APIKey
	for i := range 20000 {
		k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("tenant-%03d", i%1000), Name: fmt.Sprintf("key-%05d", i)}}
		k.Status.KeyNotAfter, k.Status.RenewalTime, k.Status.LastUsedAt = &now, &now, &now
		k.Status.Conditions = []metav1.Condition{
			{Type: switchboardv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: switchboardv1alpha1.ReasonKeyIssued},
			{Type: switchboardv1alpha1.ConditionExpiringSoon, Status: metav1.ConditionFalse, Reason: switchboardv1alpha1.ReasonNotEndingSoon},
			{Type: switchboardv1alpha1.ConditionUnused, Status: metav1.ConditionFalse, Reason: switchboardv1alpha1.ReasonUsed},
		}
		objs = append(objs, *k)
	}
	c := &keyCollector{reader: listReader{items: objs}, limit: configv1alpha1.DefaultKeyMetricsLimit}
	b.ResetTimer()
	for b.Loop() {
		ch := make(chan prometheus.Metric, 1024)
		done := make(chan int)
		go func() {
			n := 0
			for range ch {
				n++
			}
			done <- n
		}()
		c.Collect(ch)
		close(ch)
		if n := <-done; n < 60000 {
			b.Fatalf("%d series, want at least 60,000 (six per key for 10,000 keys)", n)
		}
	}
}

// listReader lists prepared APIKeys without copying them.
type listReader struct {
	client.Reader
	items []switchboardv1alpha1.APIKey
}

func (r listReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*switchboardv1alpha1.APIKeyList).Items = r.items
	return nil
}
