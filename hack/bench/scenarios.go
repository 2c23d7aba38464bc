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

// fastClient is an admin client whose rate limit does not shape what the bench measures.
func (r *rig) fastClient() (client.WithWatch, error) {
	cfg := *r.env.Config
	cfg.QPS, cfg.Burst = 5000, 10000
	return client.NewWithWatch(&cfg, client.Options{Scheme: scheme.Scheme})
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

func (r *rig) createConnections(ctx context.Context, c client.Client, ns string, from, to int) error {
	return parallel(to-from, 32, func(i int) error {
		n := from + i
		conn := &switchboardv1alpha1.Connection{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("conn-%06d", n), Labels: map[string]string{"tier": "bench"}},
			Spec: switchboardv1alpha1.ConnectionSpec{
				DisplayName: fmt.Sprintf("Connection %d", n), Provider: "postgres",
				Metadata: map[string]switchboardv1alpha1.MetadataValue{"region": "eu-west-1"},
			},
		}
		return c.Create(ctx, conn)
	})
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

// get fetches url with key and returns the status and body.
func get(ctx context.Context, url, key string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header = bearer(key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// writeResponseHeaders writes switchboard's response headers to /v1/connections, but Date, as
// "Key: value" lines.
func (r *rig) writeResponseHeaders(ctx context.Context, key, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.apiURL+"/v1/connections", nil)
	if err != nil {
		return err
	}
	req.Header = bearer(key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	var b strings.Builder
	for k, vs := range resp.Header {
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
		status, body, err := get(ctx, r.apiURL+"/v1/connections", key)
		if err == nil && status == http.StatusOK {
			if got = bytes.Count(body, []byte(`{"id":"conn_`)); got == n {
				return body, nil
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
	c, err := r.fastClient()
	if err != nil {
		return err
	}
	const ns = "bench-throughput"
	if err := r.env.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	if err := r.createConnections(ctx, c, ns, 0, 10); err != nil {
		return err
	}
	keys, err := r.issueKeys(ctx, c, ns, []string{"load"})
	if err != nil {
		return err
	}
	key := keys["load"]
	body, err := r.waitListed(ctx, key, 10, time.Minute)
	if err != nil {
		return err
	}
	bodyFile := filepath.Join(r.dir, "body.json")
	if err := os.WriteFile(bodyFile, body, 0o600); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The same constant headers as switchboard's answer, for the middle row.
	headerFile := filepath.Join(r.dir, "headers.txt")
	if err := r.writeResponseHeaders(ctx, key, headerFile); err != nil {
		return err
	}
	var addrs [6]string
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return err
		}
	}
	bareAddr, barePprof, headedAddr, headedPprof, unlimitedAddr, unlimitedPprof := addrs[0], addrs[1], addrs[2], addrs[3], addrs[4], addrs[5]
	bare, err := startProc("bare", r.dir, nil, self, "-bare-listen="+bareAddr, "-bare-body="+bodyFile, "-bare-pprof="+barePprof)
	if err != nil {
		return err
	}
	defer bare.stop()
	headed, err := startProc("bare-headers", r.dir, nil, self, "-bare-listen="+headedAddr, "-bare-body="+bodyFile, "-bare-headers="+headerFile, "-bare-pprof="+headedPprof)
	if err != nil {
		return err
	}
	defer headed.stop()
	unlimited, err := startProc("bare-no-limits", r.dir, nil, self, "-bare-listen="+unlimitedAddr, "-bare-body="+bodyFile, "-bare-headers="+headerFile, "-bare-pprof="+unlimitedPprof, "-bare-no-limits")
	if err != nil {
		return err
	}
	defer unlimited.stop()
	for _, a := range []string{bareAddr, headedAddr, unlimitedAddr} {
		if err := waitHTTP(ctx, "http://"+a+"/", 200, 10*time.Second); err != nil {
			return err
		}
	}
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
	authT := loadgen.Target{URL: authURL, Header: bearer(key), WantStatus: http.StatusOK}
	bareT := loadgen.Target{URL: bareURL, Header: bearer(key), WantStatus: http.StatusOK}
	headedT := loadgen.Target{URL: headedURL, Header: bearer(key), WantStatus: http.StatusOK}
	runs := []latencyRun{{what: "light", rate: lightRate}, {what: "a quarter of the maximum", rate: median(rpsOf(rep.authRuns)) / 4}}
	for i := range runs {
		for _, t := range []struct {
			target loadgen.Target
			into   *loadgen.Result
		}{{authT, &runs[i].auth}, {headedT, &runs[i].headed}, {bareT, &runs[i].bare}} {
			res, err := loadgen.OpenLoop(ctx, t.target, 16, runs[i].rate, 10*time.Second)
			if err != nil {
				return err
			}
			rep.loadErrors += res.Errors
			*t.into = res
		}
	}
	rep.latency = runs
	return nil
}

func (r *rig) revocation(ctx context.Context, o options) error {
	c, err := r.fastClient()
	if err != nil {
		return err
	}
	const ns = "bench-revoke"
	if err := r.env.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	names := make([]string, o.revokeN)
	for i := range names {
		names[i] = fmt.Sprintf("revoke-%03d", i)
	}
	keys, err := r.issueKeys(ctx, c, ns, names)
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
	status, _, err := get(ctx, url, key)
	if err != nil {
		return 0, fmt.Errorf("key %s before its revocation: %w", name, err)
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("key %s does not work before its revocation: status %d", name, status)
	}
	refused := make(chan time.Time, 1)
	pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		for pollCtx.Err() == nil {
			status, _, err := get(pollCtx, url, key)
			if err == nil && status == http.StatusUnauthorized {
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
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, 0, err
		}
		req.Header = bearer(key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		link := resp.Header.Get("Link")
		start, end := strings.Index(link, "<"), strings.Index(link, ">")
		if resp.StatusCode != http.StatusOK || start < 0 || end < start {
			return 0, 0, fmt.Errorf("paging: status %d, Link %q", resp.StatusCode, link)
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
