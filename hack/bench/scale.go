package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/hack/bench/loadgen"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// scaleOptions size the scale run.
type scaleOptions struct {
	connections int           // Connections in all
	namespaces  int           // tenants they and the keys are spread over
	keys        int           // APIKeys in all, the same number in each namespace
	largest     int           // Connections of the first namespace; the rest share the others
	active      time.Duration // how long every key is kept in use for the lastUsedAt figures
	restarts    int           // fresh server starts timed from start to ready
}

// memPoint is a process's live heap (after a forced GC) and resident set.
type memPoint struct{ live, rss int64 }

// freshStart is one server started against the full cluster.
type freshStart struct {
	ready time.Duration
	mem   memPoint
	// CPU time until ready: the server's own, and the API server's (serving its lists).
	serverCPU, apiserverCPU time.Duration
}

// lastUsedRun is what the lastUsedAt writer did while every key was in use.
type lastUsedRun struct {
	keys      int
	elapsed   time.Duration
	requests  int
	writes    float64 // the server's successful writes in elapsed
	patches   float64 // PATCH apikeys/status the API server counted in elapsed
	backlog   float64
	staleness float64
}

// scaleResult is everything the scale step measured.
type scaleResult struct {
	o scaleOptions

	nsSetup               time.Duration
	keysCreate, keysReady time.Duration
	opCalls               callCounts // the operator's API calls while issuing the keys
	// keyScrapes are the wall times of scrapes of the operator's /metrics with every key
	// issued; keyScrapeCollect the key collector's own time (its metric), keyScrapeBytes a
	// scrape's size.
	keyScrapes              []time.Duration
	keyScrapeCollect        float64
	keyScrapeBytes          int
	claim                   time.Duration
	connsCreate, connsReady time.Duration
	// CPU time each process spent issuing the keys, filling the Connections, and writing
	// lastUsedAt: what each costs, whoever else shared the machine.
	keysCPU, connsCPU, lastUsedCPU cpuTimes

	base, afterKeys, afterConns memPoint
	// freshKeys is a server started with only the keys cached; fresh are servers started with
	// everything: the figures without the churn of the fill.
	freshKeys freshStart
	fresh     []freshStart

	pageP50, pageP99, fullP50, fullP99 time.Duration
	fullBytes                          int

	objects                        map[string]float64
	storageBytes, storageBytes0    float64
	apiserverRSS, etcdRSS          int64
	apiserverRSS0, etcdRSS0        int64 // before the scale part
	operatorLive, operatorRSS      int64
	lastUsed                       lastUsedRun
	heapTop, startTop, keysHeapTop []string
	loadBefore, loadAfter, loadMid string
}

// benchLabel marks what the scale step creates, so that its watch sees nothing else.
const benchLabel = "bench.switchboard.dev/part"

// spread says how many Connections each namespace gets: largest in the first, the rest as
// evenly as they divide over the others.
func spread(total, namespaces, largest int) []int {
	counts := make([]int, namespaces)
	if namespaces == 1 {
		counts[0] = total
		return counts
	}
	counts[0] = min(largest, total)
	rest := total - counts[0]
	for i := 1; i < namespaces; i++ {
		counts[i] = rest / (namespaces - 1)
		if i <= rest%(namespaces-1) {
			counts[i]++
		}
	}
	return counts
}

func (r *rig) scale(ctx context.Context, o options) error {
	so := o.scaleOpts
	if so.keys < so.namespaces || so.keys%so.namespaces != 0 {
		return fmt.Errorf("-scale-keys (%d) must be a multiple of -scale-namespaces (%d)", so.keys, so.namespaces)
	}
	res := &scaleResult{o: so, loadBefore: loadAverage()}
	r.report.scale = res
	c, counter, err := r.countingClient()
	if err != nil {
		return err
	}
	meter, err := r.newCPUMeter()
	if err != nil {
		return err
	}
	if res.base, err = r.serverMem(ctx, r.server, r.metricsAddr); err != nil {
		return err
	}
	if res.apiserverRSS0, err = childRSS("kube-apiserver"); err != nil {
		return err
	}
	if res.etcdRSS0, err = childRSS("etcd"); err != nil {
		return err
	}
	m0, err := scrapeAPIServer(ctx, r.env.Config)
	if err != nil {
		return err
	}
	res.storageBytes0 = m0.storageBytes

	namespaces := make([]string, so.namespaces)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("scale-%04d", i)
	}
	start := time.Now()
	if err := parallel(len(namespaces), 32, func(i int) error { return r.env.EnsureNamespace(ctx, namespaces[i]) }); err != nil {
		return err
	}
	res.nsSetup = time.Since(start)
	fmt.Printf("bench: scale: %d namespaces in %s\n", len(namespaces), res.nsSetup.Round(time.Millisecond))

	cpu0 := meter.read()
	issued, err := r.issueAtScale(ctx, c, counter, namespaces, res)
	if err != nil {
		return err
	}
	res.keysCPU = meter.read().since(cpu0)
	if res.keyScrapes, res.keyScrapeCollect, res.keyScrapeBytes, err = scrapeKeyMetrics(ctx, r.operatorMetrics); err != nil {
		return err
	}
	if res.afterKeys, err = r.serverMem(ctx, r.server, r.metricsAddr); err != nil {
		return err
	}
	if res.freshKeys, err = r.freshServer(ctx, "keys", meter, &res.keysHeapTop, nil); err != nil {
		return err
	}

	start = time.Now()
	keys := map[string][]string{} // namespace → its claimed keys
	var mu sync.Mutex
	if err := parallel(len(issued), 32, func(i int) error {
		got, err := keyclient.Claim(ctx, c, issued[i])
		if err != nil {
			return fmt.Errorf("claiming %s/%s: %w", issued[i].Namespace, issued[i].Name, err)
		}
		mu.Lock()
		keys[issued[i].Namespace] = append(keys[issued[i].Namespace], got.Key)
		mu.Unlock()
		return nil
	}); err != nil {
		return err
	}
	res.claim = time.Since(start)
	fmt.Printf("bench: scale: %d keys claimed in %s\n", len(issued), res.claim.Round(time.Millisecond))

	counts := spread(so.connections, so.namespaces, so.largest)
	cpu0 = meter.read()
	if err := r.fillConnections(ctx, c, namespaces, counts, keys, res); err != nil {
		return err
	}
	res.connsCPU = meter.read().since(cpu0)
	res.loadMid = loadAverage()
	if res.afterConns, err = r.serverMem(ctx, r.server, r.metricsAddr); err != nil {
		return err
	}

	largest := keys[namespaces[0]][0]
	if res.pageP50, res.pageP99, err = r.pageLatency(ctx, largest, counts[0]); err != nil {
		return err
	}
	a, err := get(ctx, r.apiURL+"/v1/connections", largest)
	if err != nil {
		return err
	}
	res.fullBytes = len(a.body)
	full, err := loadgen.ClosedLoop(ctx, loadgen.Target{URL: r.apiURL + "/v1/connections", Header: bearer(largest), WantStatus: http.StatusOK}, 1, 500*time.Millisecond, 3*time.Second)
	if err != nil {
		return err
	}
	res.fullP50, res.fullP99 = full.Percentile(0.5), full.Percentile(0.99)

	var all []string
	for _, ns := range namespaces {
		all = append(all, keys[ns]...)
	}
	if err := r.keepKeysInUse(ctx, all, so.active, meter, res); err != nil {
		return err
	}

	for i := range so.restarts {
		var top, cpuTop *[]string
		if i == so.restarts-1 {
			top, cpuTop = &res.heapTop, &res.startTop
		}
		f, err := r.freshServer(ctx, fmt.Sprint(i+1), meter, top, cpuTop)
		if err != nil {
			return err
		}
		res.fresh = append(res.fresh, f)
		fmt.Printf("bench: scale: a fresh server was ready in %s\n", f.ready.Round(time.Millisecond))
	}

	m, err := scrapeAPIServer(ctx, r.env.Config)
	if err != nil {
		return err
	}
	res.storageBytes = m.storageBytes
	if res.objects, err = countObjects(ctx, c); err != nil {
		return err
	}
	if res.apiserverRSS, err = childRSS("kube-apiserver"); err != nil {
		return err
	}
	if res.etcdRSS, err = childRSS("etcd"); err != nil {
		return err
	}
	_, res.operatorLive = r.operator.gc()
	if res.operatorRSS, err = r.operator.rss(); err != nil {
		return err
	}
	res.loadAfter = loadAverage()
	return nil
}

// countObjects counts the objects of each kind the system stores, from one LIST with limit 1
// (the API server tells how many items remain).
func countObjects(ctx context.Context, c client.Client) (map[string]float64, error) {
	counts := map[string]float64{}
	for _, k := range []struct {
		name string
		list client.ObjectList
	}{
		{"Connections", &switchboardv1alpha1.ConnectionList{}},
		{"APIKeys", &switchboardv1alpha1.APIKeyList{}},
		{"Secrets", &corev1.SecretList{}},
		{"Events", &corev1.EventList{}},
		{"Namespaces", &corev1.NamespaceList{}},
	} {
		if err := c.List(ctx, k.list, client.Limit(1)); err != nil {
			return nil, err
		}
		n := float64(meta.LenList(k.list))
		if rest := k.list.(metav1.ListInterface).GetRemainingItemCount(); rest != nil {
			n += float64(*rest)
		}
		counts[k.name] = n
	}
	return counts, nil
}

// fillConnections creates counts[i] Connections in namespaces[i], all at once, and waits until
// the server lists every one (the operator has given each its id).
func (r *rig) fillConnections(ctx context.Context, c client.Client, namespaces []string, counts []int, keys map[string][]string, res *scaleResult) error {
	type slot struct{ ns, n int }
	var slots []slot
	for i, n := range counts {
		for j := range n {
			slots = append(slots, slot{i, j})
		}
	}
	start := time.Now()
	if err := parallel(len(slots), 64, func(i int) error {
		return c.Create(ctx, benchConnection(namespaces[slots[i].ns], slots[i].n))
	}); err != nil {
		return err
	}
	res.connsCreate = time.Since(start)
	fmt.Printf("bench: scale: %d Connections created in %s\n", len(slots), res.connsCreate.Round(time.Millisecond))
	pending := map[int]bool{}
	for i := range namespaces {
		pending[i] = true
	}
	deadline := time.Now().Add(30 * time.Minute)
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d namespaces still not fully listed after 30 minutes", len(pending))
		}
		for i := range pending {
			a, err := get(ctx, r.apiURL+"/v1/connections", keys[namespaces[i]][0])
			if err != nil {
				return err
			}
			if a.code == http.StatusOK && bytes.Count(a.body, []byte(`{"id":"conn_`)) == counts[i] {
				delete(pending, i)
			}
		}
		if len(pending) > 0 {
			time.Sleep(2 * time.Second)
		}
	}
	res.connsReady = time.Since(start)
	fmt.Printf("bench: scale: %d Connections listed by the server %s after the first create\n", len(slots), res.connsReady.Round(time.Millisecond))
	return nil
}
