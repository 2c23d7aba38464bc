package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/hack/bench/loadgen"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/scheme"
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

// countingClient is fastClient whose calls are counted.
func (r *rig) countingClient() (client.WithWatch, *countingTransport, error) {
	cfg := *r.env.Config
	cfg.QPS, cfg.Burst = 5000, 10000
	ct := &countingTransport{seen: callCounts{}}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct }
	c, err := client.NewWithWatch(&cfg, client.Options{Scheme: scheme.Scheme})
	return c, ct, err
}

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
	if res.freshKeys, err = r.freshServer(ctx, "keys", &res.keysHeapTop, nil); err != nil {
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
	_, body, err := get(ctx, r.apiURL+"/v1/connections", largest)
	if err != nil {
		return err
	}
	res.fullBytes = len(body)
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
		f, err := r.freshServer(ctx, fmt.Sprint(i+1), top, cpuTop)
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
		s := slots[i]
		return c.Create(ctx, &switchboardv1alpha1.Connection{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[s.ns], Name: fmt.Sprintf("conn-%06d", s.n), Labels: map[string]string{"tier": "bench"}},
			Spec: switchboardv1alpha1.ConnectionSpec{
				DisplayName: fmt.Sprintf("Connection %d", s.n), Provider: "postgres",
				Metadata: map[string]switchboardv1alpha1.MetadataValue{"region": "eu-west-1"},
			},
		})
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
			status, body, err := get(ctx, r.apiURL+"/v1/connections", keys[namespaces[i]][0])
			if err != nil {
				return err
			}
			if status == http.StatusOK && bytes.Count(body, []byte(`{"id":"conn_`)) == counts[i] {
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

// keepKeysInUse sends requests with every key in turn, about one round of all keys every 10
// seconds, and measures the server's lastUsedAt writes over d after a warm-up of one round.
func (r *rig) keepKeysInUse(ctx context.Context, keys []string, d time.Duration, meter *cpuMeter, res *scaleResult) error {
	const round = 10 * time.Second
	perSecond := float64(len(keys)) / round.Seconds()
	limit := rate.NewLimiter(rate.Limit(perSecond), 64)
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	var next, sent, failed atomic.Int64
	var wg sync.WaitGroup
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 10 * time.Second}
	for range 16 {
		wg.Go(func() {
			for limit.Wait(loadCtx) == nil {
				key := keys[int(next.Add(1)-1)%len(keys)]
				req, _ := http.NewRequestWithContext(loadCtx, http.MethodGet, r.apiURL+"/v1/nothing-here", nil)
				req.Header = bearer(key)
				resp, err := hc.Do(req)
				if err != nil {
					if loadCtx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound { // authenticated, then no such route
					failed.Add(1)
				}
				sent.Add(1)
			}
		})
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(round + 2*time.Second):
	}
	hc0 := &http.Client{Timeout: 10 * time.Second}
	srv0, err := scrape(ctx, hc0, "http://"+r.metricsAddr+"/metrics")
	if err != nil {
		return err
	}
	api0, err := scrapeAPIServer(ctx, r.env.Config)
	if err != nil {
		return err
	}
	sent0, start, cpu0 := sent.Load(), time.Now(), meter.read()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	srv1, err := scrape(ctx, hc0, "http://"+r.metricsAddr+"/metrics")
	if err != nil {
		return err
	}
	api1, err := scrapeAPIServer(ctx, r.env.Config)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	res.lastUsedCPU = meter.read().since(cpu0)
	stop()
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d requests with the scale keys failed or were refused", n)
	}
	const writes = "switchboard_api_last_used_writes_total"
	res.lastUsed = lastUsedRun{
		keys: len(keys), elapsed: elapsed, requests: int(sent.Load() - sent0),
		writes:    metricValue(srv1, writes, "result", "ok") - metricValue(srv0, writes, "result", "ok"),
		patches:   api1.calls["PATCH apikeys/status"] - api0.calls["PATCH apikeys/status"],
		backlog:   metricValue(srv1, "switchboard_api_last_used_backlog"),
		staleness: metricValue(srv1, "switchboard_api_last_used_staleness_seconds"),
	}
	fmt.Printf("bench: scale: %d keys in use: %.1f lastUsedAt writes/s\n", len(keys), res.lastUsed.writes/elapsed.Seconds())
	return nil
}

// serverMem forces a GC in a server started with --pprof and returns its live heap (the heap
// allocated right after that GC, from the profile's runtime.MemStats) and its RSS.
func (r *rig) serverMem(ctx context.Context, p *proc, metricsAddr string) (memPoint, error) {
	raw, err := r.fetch(ctx, "http://"+metricsAddr+"/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return memPoint{}, err
	}
	i := bytes.Index(raw, []byte("\n# HeapAlloc = "))
	if i < 0 {
		return memPoint{}, errors.New("the server's heap profile has no HeapAlloc")
	}
	var live int64
	if _, err := fmt.Sscanf(string(raw[i+1:]), "# HeapAlloc = %d", &live); err != nil {
		return memPoint{}, fmt.Errorf("reading HeapAlloc: %w", err)
	}
	rss, err := p.rss()
	return memPoint{live: live, rss: rss}, err
}

func (r *rig) fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, err
}

// freshServer starts another server against the cluster, times it from start to ready,
// measures its memory, keeps its heap profile, and, when top is set, the profile's top entries.
//
// With cpuTop set, it also profiles the server's CPU from when its metrics port answers, for
// startProfile (ready or not: after ready it idles), and keeps that profile's top entries.
func (r *rig) freshServer(ctx context.Context, name string, top, cpuTop *[]string) (freshStart, error) {
	var addrs [3]string
	for j := range addrs {
		a, err := freeAddr()
		if err != nil {
			return freshStart{}, err
		}
		addrs[j] = a
	}
	apiPID, err := childPID("kube-apiserver")
	if err != nil {
		return freshStart{}, err
	}
	api0, err := pidCPU(apiPID)
	if err != nil {
		return freshStart{}, err
	}
	start := time.Now()
	p, err := startProc("server-fresh-"+name, r.dir, r.kenv, r.bin, "server", "--listen="+addrs[0],
		"--metrics-bind-address="+addrs[1], "--metrics-secure=false", "--pprof", "--health-probe-bind-address="+addrs[2], "--shutdown-delay=-1s")
	if err != nil {
		return freshStart{}, err
	}
	defer p.stop()
	profiled := make(chan error, 1)
	if cpuTop != nil {
		go func() { profiled <- r.startupProfile(ctx, name, addrs[1], cpuTop) }()
	} else {
		profiled <- nil
	}
	if err := pollReady(ctx, "http://"+addrs[2]+"/readyz", 5*time.Minute); err != nil {
		return freshStart{}, err
	}
	f := freshStart{ready: time.Since(start)}
	if f.serverCPU, err = pidCPU(p.Pid()); err != nil {
		return freshStart{}, err
	}
	api1, err := pidCPU(apiPID)
	if err != nil {
		return freshStart{}, err
	}
	f.apiserverCPU = api1 - api0
	if err := <-profiled; err != nil { // buffered: on an earlier return the profiler still ends
		return freshStart{}, err
	}
	if f.mem, err = r.serverMem(ctx, p, addrs[1]); err != nil {
		return freshStart{}, err
	}
	raw, err := r.fetch(ctx, "http://"+addrs[1]+"/debug/pprof/heap")
	if err != nil {
		return freshStart{}, err
	}
	file := filepath.Join(r.dir, "server-heap-"+name+".pprof")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return freshStart{}, err
	}
	if top != nil {
		out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=14", "-sample_index=inuse_space", file).Output() // #nosec G204 -- the bench profiles its own server.
		if err != nil {
			return freshStart{}, fmt.Errorf("go tool pprof: %w", err)
		}
		*top = pprofTop(string(out))
	}
	return f, nil
}

// startProfile is how long a start-up CPU profile runs.
const startProfile = 30 * time.Second

// startupProfile waits for a starting server's metrics port and profiles its CPU for
// startProfile.
func (r *rig) startupProfile(ctx context.Context, name, metricsAddr string, top *[]string) error {
	if err := pollReady(ctx, "http://"+metricsAddr+"/metrics", time.Minute); err != nil {
		return err
	}
	raw, err := r.fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", metricsAddr, int(startProfile.Seconds())))
	if err != nil {
		return err
	}
	file := filepath.Join(r.dir, "server-start-cpu-"+name+".pprof")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=30", file).Output() // #nosec G204 -- the bench profiles its own server.
	if err != nil {
		return fmt.Errorf("go tool pprof: %w", err)
	}
	*top = pprofTop(string(out))
	return nil
}

// pprofTop keeps the table of `go tool pprof -top`: its header line and the entries.
func pprofTop(out string) []string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "flat%") })
	if i < 0 {
		return lines
	}
	return lines[i:]
}

// pollReady polls a readiness URL every 25 ms until it answers 200.
func pollReady(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("%s was not ready after %s", url, timeout)
}

// scrapeKeyMetrics scrapes the operator's /metrics five times, as Prometheus would, and returns
// each scrape's wall time, the key collector's own time in the last one, and its size.
func scrapeKeyMetrics(ctx context.Context, addr string) (walls []time.Duration, collect float64, size int, err error) {
	for range 5 {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			return nil, 0, 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, 0, 0, err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, 0, 0, err
		}
		walls, size = append(walls, time.Since(start)), len(body)
	}
	collect, err = metricSum(ctx, addr, "switchboard_apikey_metrics_scrape_seconds")
	return walls, collect, size, err
}
