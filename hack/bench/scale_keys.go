package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// countingClient is fastClient whose calls are counted.
func (r *rig) countingClient() (client.WithWatch, *countingTransport, error) {
	ct := &countingTransport{seen: callCounts{}}
	c, err := r.fastClient(func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct })
	return c, ct, err
}

// issueAtScale creates keys-per-namespace APIKeys in every namespace at once and waits until
// the operator has made them all Ready, counting the API calls it made meanwhile. It returns the
// Ready APIKeys, whose status names their reveal Secrets.
func (r *rig) issueAtScale(ctx context.Context, c client.WithWatch, counter *countingTransport, namespaces []string, res *scaleResult) ([]*switchboardv1alpha1.APIKey, error) {
	perNS := res.o.keys / len(namespaces)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	type outcome struct {
		ready []*switchboardv1alpha1.APIKey
		err   error
	}
	done := make(chan outcome, 1)
	watching := make(chan struct{})
	sel := labels.SelectorFromSet(labels.Set{benchLabel: "scale"})
	go func() {
		ready, err := waitAllReady(waitCtx, c, sel, res.o.keys, watching)
		done <- outcome{ready, err}
	}()
	select {
	case <-watching:
	case out := <-done:
		return nil, out.err
	}
	before, err := scrapeAPIServer(ctx, r.env.Config)
	if err != nil {
		return nil, err
	}
	mine := counter.snapshot()
	start := time.Now()
	if err := parallel(res.o.keys, 64, func(i int) error {
		return c.Create(ctx, &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{
			Namespace: namespaces[i/perNS], Name: fmt.Sprintf("key-%03d", i%perNS), Labels: map[string]string{benchLabel: "scale"},
		}})
	}); err != nil {
		return nil, err
	}
	res.keysCreate = time.Since(start)
	fmt.Printf("bench: scale: %d APIKeys created in %s\n", res.o.keys, res.keysCreate.Round(time.Millisecond))
	out := <-done
	if out.err != nil {
		return nil, out.err
	}
	res.keysReady = time.Since(start)
	fmt.Printf("bench: scale: %d APIKeys Ready in %s\n", res.o.keys, res.keysReady.Round(time.Millisecond))
	after, err := scrapeAPIServer(ctx, r.env.Config)
	if err != nil {
		return nil, err
	}
	// The API server counts everyone's calls; take away the bench's own (its creates and the
	// list behind its watch). What is left is the operator's: the server only watches, and
	// nothing else runs. Watches are long-running and counted when they end, so they are left out.
	res.opCalls = callCounts{}
	for kind, v := range after.calls.sub(before.calls).sub(counter.snapshot().sub(mine)) {
		if !strings.HasPrefix(kind, "WATCH ") {
			res.opCalls[kind] = v
		}
	}
	return out.ready, nil
}

// waitAllReady lists and then watches the APIKeys matching sel until n of them are Ready, and
// returns them. It closes watching once the first watch is open, so nothing created after that
// is missed. A watch, not a LIST every few hundred milliseconds, counts them: polling would load
// the API server the operator is being measured against.
func waitAllReady(ctx context.Context, c client.WithWatch, sel labels.Selector, n int, watching chan<- struct{}) ([]*switchboardv1alpha1.APIKey, error) {
	ready := map[string]*switchboardv1alpha1.APIKey{}
	observe := func(key *switchboardv1alpha1.APIKey) {
		id := key.Namespace + "/" + key.Name
		if meta.IsStatusConditionTrue(key.Status.Conditions, switchboardv1alpha1.ConditionReady) && key.Status.RevealSecretName != "" {
			ready[id] = key
		} else {
			delete(ready, id)
		}
	}
	var once sync.Once
	for {
		var list switchboardv1alpha1.APIKeyList
		if err := c.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, err
		}
		for i := range list.Items {
			observe(&list.Items[i])
		}
		w, err := c.Watch(ctx, &switchboardv1alpha1.APIKeyList{}, client.MatchingLabelsSelector{Selector: sel},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			return nil, err
		}
		once.Do(func() { close(watching) })
		for ev := range w.ResultChan() {
			if key, ok := ev.Object.(*switchboardv1alpha1.APIKey); ok {
				observe(key)
			}
			if len(ready) >= n {
				w.Stop()
				out := make([]*switchboardv1alpha1.APIKey, 0, len(ready))
				for _, k := range ready {
					out = append(out, k)
				}
				return out, nil
			}
		}
		// The watch ended (a timeout, or ctx): list again and carry on, unless ctx is done.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d APIKeys Ready when the wait ended: %w", len(ready), n, ctx.Err())
		}
	}
}

// scrapeKeyMetrics scrapes the operator's /metrics five times, as Prometheus would, and returns
// each scrape's wall time, the key collector's own time in the last one, and its size.
func scrapeKeyMetrics(ctx context.Context, addr string) (walls []time.Duration, collect float64, size int, err error) {
	for range 5 {
		start := time.Now()
		a, err := get(ctx, "http://"+addr+"/metrics", "")
		if err != nil {
			return nil, 0, 0, err
		}
		walls, size = append(walls, time.Since(start)), len(a.body)
	}
	collect, err = metricSum(ctx, addr, "switchboard_apikey_metrics_scrape_seconds")
	return walls, collect, size, err
}
