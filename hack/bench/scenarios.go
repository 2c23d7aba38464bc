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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/hack/bench/loadgen"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// fastClient is an admin client whose rate limit does not shape what the bench measures; wrap,
// when set, wraps its transport.
func (r *rig) fastClient(wrap func(http.RoundTripper) http.RoundTripper) (client.WithWatch, error) {
	cfg := *r.env.Config
	cfg.QPS, cfg.Burst, cfg.WrapTransport = 5000, 10000, wrap
	return client.NewWithWatch(&cfg, client.Options{Scheme: scheme.Scheme})
}

// tenant makes namespace ns with conns Connections and issues the keys named in it: what a part
// measures with. It returns the admin client it used and the keys by name.
func (r *rig) tenant(ctx context.Context, ns string, conns int, keyNames ...string) (client.Client, map[string]string, error) {
	c, err := r.fastClient(nil)
	if err != nil {
		return nil, nil, err
	}
	if err := r.env.EnsureNamespace(ctx, ns); err != nil {
		return nil, nil, err
	}
	if err := parallel(conns, 32, func(i int) error { return c.Create(ctx, benchConnection(ns, i)) }); err != nil {
		return nil, nil, err
	}
	keys, err := r.issueKeys(ctx, c, ns, keyNames)
	return c, keys, err
}

// parallel runs fn(i) for i in [0, n) on width goroutines and returns the first error.
func parallel(n, width int, fn func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range width {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// benchConnection is the Connection number n the bench creates in namespace ns.
func benchConnection(ns string, n int) *switchboardv1alpha1.Connection {
	return &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("conn-%06d", n), Labels: map[string]string{"tier": "bench"}},
		Spec: switchboardv1alpha1.ConnectionSpec{
			DisplayName: fmt.Sprintf("Connection %d", n), Provider: "postgres",
			Metadata: map[string]switchboardv1alpha1.MetadataValue{"region": "eu-west-1"},
		},
	}
}

// issueKeys creates APIKeys and claims their keys once the operator publishes them.
func (r *rig) issueKeys(ctx context.Context, c client.Client, ns string, names []string) (map[string]string, error) {
	for _, name := range names {
		if err := c.Create(ctx, &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			return nil, err
		}
	}
	keys := map[string]string{}
	var mu sync.Mutex
	err := parallel(len(names), 8, func(i int) error {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			var ak switchboardv1alpha1.APIKey
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[i]}, &ak); err != nil {
				return err
			}
			if ak.Status.RevealSecretName != "" {
				got, err := keyclient.Claim(ctx, c, &ak)
				if err != nil {
					return err
				}
				mu.Lock()
				keys[names[i]] = got.Key
				mu.Unlock()
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("APIKey %s/%s was not issued in 2 minutes", ns, names[i])
	})
	return keys, err
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// answer is what a GET answered.
type answer struct {
	status string // the status line's, as "200 OK"
	code   int
	header http.Header
	body   []byte
}

// get fetches url, with key when there is one.
func get(ctx context.Context, url, key string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{}, err
	}
	if key != "" {
		req.Header = bearer(key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return answer{resp.Status, resp.StatusCode, resp.Header, body}, err
}

// fetch GETs url and returns its body, failing unless it answers 200.
func fetch(ctx context.Context, url string) ([]byte, error) {
	a, err := get(ctx, url, "")
	if err == nil && a.code != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, a.status)
	}
	return a.body, err
}

// writeResponseHeaders writes switchboard's response headers to /v1/connections, but Date, as
// "Key: value" lines.
func (r *rig) writeResponseHeaders(ctx context.Context, key, file string) error {
	a, err := get(ctx, r.apiURL+"/v1/connections", key)
	if err != nil {
		return err
	}
	var b strings.Builder
	for k, vs := range a.header {
		if k != "Date" && len(vs) == 1 {
			fmt.Fprintf(&b, "%s: %s\n", k, vs[0])
		}
	}
	return os.WriteFile(file, []byte(b.String()), 0o600)
}

// waitListed waits until the key lists exactly n connections.
func (r *rig) waitListed(ctx context.Context, key string, n int, timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	got := -1
	for time.Now().Before(deadline) {
		a, err := get(ctx, r.apiURL+"/v1/connections", key)
		if err == nil && a.code == http.StatusOK {
			if got = bytes.Count(a.body, []byte(`{"id":"conn_`)); got == n {
				return a.body, nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return nil, fmt.Errorf("the server listed %d connections, not %d, after %s", got, n, timeout)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// lightRate is the open-loop rate that shows the server's latency without CPU contention.
const lightRate = 1000

func (r *rig) throughput(ctx context.Context, o options) error {
	if err := checkWrk(); err != nil {
		return err
	}
	_, keys, err := r.tenant(ctx, "bench-throughput", 10, "load")
	if err != nil {
		return err
	}
	key := keys["load"]
	body, err := r.waitListed(ctx, key, 10, time.Minute)
	if err != nil {
		return err
	}
	// The same constant headers as switchboard's answer, for the middle row.
	headerFile := filepath.Join(r.dir, "headers.txt")
	if err := r.writeResponseHeaders(ctx, key, headerFile); err != nil {
		return err
	}
	pprofs, err := freeAddrs(3)
	if err != nil {
		return err
	}
	barePprof, headedPprof, unlimitedPprof := pprofs[0], pprofs[1], pprofs[2]
	bare, bareAddr, err := r.startBare(ctx, "bare", "body.json", body, "-bare-pprof="+barePprof)
	if err != nil {
		return err
	}
	defer bare.stop()
	headed, headedAddr, err := r.startBare(ctx, "bare-headers", "body.json", body, "-bare-headers="+headerFile, "-bare-pprof="+headedPprof)
	if err != nil {
		return err
	}
	defer headed.stop()
	unlimited, unlimitedAddr, err := r.startBare(ctx, "bare-no-limits", "body.json", body, "-bare-headers="+headerFile, "-bare-pprof="+unlimitedPprof, "-bare-no-limits")
	if err != nil {
		return err
	}
	defer unlimited.stop()
	authURL, bareURL := r.apiURL+"/v1/connections", "http://"+bareAddr+"/v1/connections"
	headedURL, unlimitedURL := "http://"+headedAddr+"/v1/connections", "http://"+unlimitedAddr+"/v1/connections"
	authHeader := "Authorization: Bearer " + key

	rep := r.report
	rep.bodyBytes, rep.conns, rep.duration, rep.rounds = len(body), o.conns, o.duration, o.rounds
	rep.loadBefore = loadAverage()
	type side struct {
		url, header string
		pid         int
		into        *[]loadRun
	}
	// Every side gets the very same request, key included: the bare handlers ignore it, but
	// net/http parses it for them too, so what differs is what switchboard does with it.
	bareSide := side{bareURL, authHeader, bare.Pid(), &rep.bareRuns}
	headedSide := side{headedURL, authHeader, headed.Pid(), &rep.headedRuns}
	unlimitedSide := side{unlimitedURL, authHeader, unlimited.Pid(), &rep.unlimitedRuns}
	authSide := side{authURL, authHeader, r.server.Pid(), &rep.authRuns}
	for _, s := range []side{bareSide, headedSide, unlimitedSide, authSide} { // warm-up: connections, caches, the CPU's clock
		if _, err := runWrk(ctx, s.url, s.header, o.conns, 2*time.Second); err != nil {
			return err
		}
	}
	for round := range o.rounds {
		order := []side{bareSide, headedSide, unlimitedSide, authSide}
		if round%2 == 1 { // alternate the order, so that drift favours none
			slices.Reverse(order)
		}
		for _, s := range order {
			run, err := measuredRun(ctx, s.pid, s.url, s.header, o.conns, o.duration)
			if err != nil {
				return err
			}
			rep.loadErrors += run.bad
			*s.into = append(*s.into, run)
		}
		b, h, f, a := rep.bareRuns[round], rep.headedRuns[round], rep.unlimitedRuns[round], rep.authRuns[round]
		fmt.Printf("bench: throughput round %d: bare %.0f/s (%.1f µs), with the headers %.0f/s (%.1f µs), with no limits %.0f/s (%.1f µs), switchboard %.0f/s (%.1f µs); others used %.2f, %.2f, %.2f, %.2f cores\n",
			round+1, b.rps, b.usPerRequest(), h.rps, h.usPerRequest(), f.rps, f.usPerRequest(), a.rps, a.usPerRequest(), b.othersCores(), h.othersCores(), f.othersCores(), a.othersCores())
	}
	rep.loadAfter = loadAverage()
	for _, p := range []struct {
		name, url, pprof string
		into             *cpuProfile
	}{
		{"switchboard", authURL, r.metricsAddr, &rep.authProf},
		{"same-bytes-no-limits", unlimitedURL, unlimitedPprof, &rep.unlimitedProf},
		{"same-bytes", headedURL, headedPprof, &rep.headedProf},
		{"bare", bareURL, barePprof, &rep.bareProf},
	} {
		if *p.into, err = r.profileUnderLoad(ctx, p.name, p.url, authHeader, p.pprof, o.conns, 10*time.Second); err != nil {
			return err
		}
	}

	// Open-loop latency, from the in-repo generator, well below the rate where it saturates
	// itself (it shares the cores with the server).
	runs := []latencyRun{{what: "light", rate: lightRate}, {what: "a quarter of the maximum", rate: median(rpsOf(rep.authRuns)) / 4}}
	for i := range runs {
		errs, err := openLoops(ctx, runs[i].rate, openRun{authURL, key, &runs[i].auth}, openRun{headedURL, key, &runs[i].headed}, openRun{bareURL, key, &runs[i].bare})
		if err != nil {
			return err
		}
		rep.loadErrors += errs
	}
	rep.latency = runs
	return nil
}

// openRun is one open-loop run of the in-repo generator: GET url with key, its result into into.
type openRun struct {
	url, key string
	into     *loadgen.Result
}

// openLoops runs each in turn, open loop at rate for 10 s on 16 connections, and returns how many
// of their requests failed.
func openLoops(ctx context.Context, rate float64, runs ...openRun) (int, error) {
	failed := 0
	for _, run := range runs {
		var err error
		target := loadgen.Target{URL: run.url, Header: bearer(run.key), WantStatus: http.StatusOK}
		if *run.into, err = loadgen.OpenLoop(ctx, target, 16, rate, 10*time.Second); err != nil {
			return failed, err
		}
		failed += run.into.Errors
	}
	return failed, nil
}

func (r *rig) revocation(ctx context.Context, o options) error {
	const ns = "bench-revoke"
	names := make([]string, o.revokeN)
	for i := range names {
		names[i] = fmt.Sprintf("revoke-%03d", i)
	}
	c, keys, err := r.tenant(ctx, ns, 0, names...)
	if err != nil {
		return err
	}
	for _, name := range names {
		got, err := revokeOne(ctx, c, ns, name, keys[name], r.apiURL+"/v1/connections")
		if err != nil {
			return err
		}
		r.report.revocations = append(r.report.revocations, got)
	}
	return nil
}

// revokeOne polls url (/v1, or a gateway) with the key every millisecond, patches
// spec.revoked, and returns the time from the start of the patch to the first 401.
func revokeOne(ctx context.Context, c client.Client, ns, name, key, url string) (time.Duration, error) {
	a, err := get(ctx, url, key)
	if err != nil {
		return 0, fmt.Errorf("key %s before its revocation: %w", name, err)
	}
	if a.code != http.StatusOK {
		return 0, fmt.Errorf("key %s does not work before its revocation: status %d", name, a.code)
	}
	refused := make(chan time.Time, 1)
	pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		for pollCtx.Err() == nil {
			a, err := get(pollCtx, url, key)
			if err == nil && a.code == http.StatusUnauthorized {
				refused <- time.Now()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var ak switchboardv1alpha1.APIKey
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ak); err != nil {
		return 0, err
	}
	base := ak.DeepCopy()
	ak.Spec.Revoked = true
	start := time.Now()
	if err := c.Patch(ctx, &ak, client.MergeFrom(base)); err != nil {
		return 0, err
	}
	select {
	case at := <-refused:
		return at.Sub(start), nil
	case <-pollCtx.Done():
		return 0, fmt.Errorf("key %s still worked 30 s after its revocation", name)
	}
}

// pageLatency follows Link headers to the middle of a namespace of n connections and measures
// one page of 100 from there.
func (r *rig) pageLatency(ctx context.Context, key string, n int) (time.Duration, time.Duration, error) {
	url := r.apiURL + "/v1/connections?limit=100"
	for range n / 200 {
		a, err := get(ctx, url, key)
		if err != nil {
			return 0, 0, err
		}
		link := a.header.Get("Link")
		start, end := strings.Index(link, "<"), strings.Index(link, ">")
		if a.code != http.StatusOK || start < 0 || end < start {
			return 0, 0, fmt.Errorf("paging: status %d, Link %q", a.code, link)
		}
		url = r.apiURL + link[start+1:end]
	}
	res, err := loadgen.ClosedLoop(ctx, loadgen.Target{URL: url, Header: bearer(key), WantStatus: http.StatusOK}, 1, 500*time.Millisecond, 3*time.Second)
	if err != nil {
		return 0, 0, err
	}
	return res.Percentile(0.5), res.Percentile(0.99), nil
}

func (r *rig) hotPath(ctx context.Context, _ options) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "1",
		"./internal/apikey/", "./internal/server/keyindex/", "./internal/server/keycheck/", "./internal/server/v1api/", "./internal/server/indexfeed/")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go test -bench: %w\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Benchmark") {
			r.report.benchLines = append(r.report.benchLines, strings.Join(strings.Fields(line), " "))
		}
	}
	if len(r.report.benchLines) == 0 {
		return errors.New("go test -bench printed no benchmark")
	}
	return nil
}

func fmtBytes(b int64) string {
	switch {
	case b >= 1<<20:
		return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB"
	case b >= 1<<10:
		return strconv.FormatFloat(float64(b)/(1<<10), 'f', 2, 64) + " KiB"
	}
	return strconv.FormatInt(b, 10) + " B"
}
