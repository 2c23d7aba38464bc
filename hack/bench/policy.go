package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/hack/bench/loadgen"
)

// The "policy" part: what a key's rate limit costs on the request path. Throughput (wrk, the
// same rounds as part 1) of a bare handler, a key without a policy and a rate-limited key
// decided in memory; then open-loop latency of a key without a policy and a limited key on a
// second server whose limiter is a real redis-server on loopback. The limit (a million a
// second) is never reached: every request is a 200, so what is measured is the limiter's cost.

// policyResult is what the policy part measured.
type policyResult struct {
	bareRPS, openRPS, limitedRPS []float64
	redisRPS                     []float64
	// Latency at lightRate on the Redis-backed server: a key without a policy (the limiter is
	// not consulted) and a limited one (one Redis round trip per request).
	redisOpen, redisLimited loadgen.Result
	bodyBytes               int
	conns                   int
	duration                time.Duration
	// shares are cumulative shares of the server's CPU, by profile ("limited", "open") and
	// function, under wrk load.
	shares                map[string]map[string]float64
	loadBefore, loadAfter string
	// fallbacks counts the Redis-backed server's requests that Redis did not decide within its
	// timeout, so memory did: the report says how many of its figures are not Redis's.
	fallbacks float64
}

// Functions whose share of the server's CPU the policy part reports.
const (
	fnPolicy      = "internal/server/ratelimit.(*Limiter).Allow"
	fnWriteHeader = "net/http.(*chunkWriter).writeHeader"
)

// unreachedLimit is the rate limit of the measured key: the most the schema allows per second.
var unreachedLimit = &switchboardv1alpha1.APIKeyRateLimit{Requests: switchboardv1alpha1.RateLimitMaxRequests, Period: metav1.Duration{Duration: time.Second}}

func (r *rig) policy(ctx context.Context, o options) error {
	if err := checkWrk(); err != nil {
		return err
	}
	c, err := r.fastClient()
	if err != nil {
		return err
	}
	const ns = "bench-policy"
	if err := r.env.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	if err := r.createConnections(ctx, c, ns, 0, 10); err != nil {
		return err
	}
	keys, err := r.issueKeys(ctx, c, ns, []string{"open", "limited"})
	if err != nil {
		return err
	}
	var limited switchboardv1alpha1.APIKey
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "limited"}, &limited); err != nil {
		return err
	}
	patch := client.MergeFrom(limited.DeepCopy())
	limited.Spec.RateLimit = unreachedLimit
	if err := c.Patch(ctx, &limited, patch); err != nil {
		return err
	}
	body, err := r.waitListed(ctx, keys["open"], 10, time.Minute)
	if err != nil {
		return err
	}
	if err := waitRateLimited(ctx, r.apiURL, keys["limited"]); err != nil {
		return err
	}

	bareAddr, err := freeAddr()
	if err != nil {
		return err
	}
	bare, err := r.startSelf("policy-bare", "policy-body.json", body, func(path string) []string {
		return []string{"-bare-listen=" + bareAddr, "-bare-body=" + path}
	})
	if err != nil {
		return err
	}
	defer bare.stop()
	if err := waitHTTP(ctx, "http://"+bareAddr+"/", 200, 10*time.Second); err != nil {
		return err
	}

	redisAddr, err := freeAddr()
	if err != nil {
		return err
	}
	_, redisPort, err := net.SplitHostPort(redisAddr)
	if err != nil {
		return err
	}
	redis, err := startProc("redis-server", r.dir, nil, "redis-server", "--bind", "127.0.0.1", "--port", redisPort,
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	if err != nil {
		return fmt.Errorf("starting redis-server (apt-get install redis-server): %w", err)
	}
	defer redis.stop()
	if err := redis.WaitUntil(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", redisAddr)
		if err != nil {
			return err
		}
		return conn.Close()
	}); err != nil {
		return err
	}
	onRedis, redisURL, redisMetrics, err := r.startRedisServer(ctx, redisAddr)
	if err != nil {
		return err
	}
	defer onRedis.stop()
	if err := waitRateLimited(ctx, redisURL, keys["limited"]); err != nil {
		return err
	}

	res := &policyResult{loadBefore: loadAverage(), bodyBytes: len(body), conns: o.conns, duration: o.duration}
	type side struct {
		url, key string
		into     *[]float64
	}
	sides := []side{
		{"http://" + bareAddr + "/v1/connections", "", &res.bareRPS},
		{r.apiURL + "/v1/connections", keys["open"], &res.openRPS},
		{r.apiURL + "/v1/connections", keys["limited"], &res.limitedRPS},
		{redisURL + "/v1/connections", keys["limited"], &res.redisRPS},
	}
	header := func(key string) string {
		if key == "" {
			return ""
		}
		return "Authorization: Bearer " + key
	}
	for _, s := range sides { // warm-up
		if _, err := runWrk(ctx, s.url, header(s.key), o.conns, 2*time.Second); err != nil {
			return err
		}
	}
	for round := range o.rounds {
		for i := range sides { // rotate who goes first, so that drift favours none
			s := sides[(i+round)%len(sides)]
			w, err := runWrk(ctx, s.url, header(s.key), o.conns, o.duration)
			if err != nil {
				return err
			}
			if w.bad > 0 {
				return fmt.Errorf("wrk on %s: %d failed or unexpected responses (a limit reached?)", s.url, w.bad)
			}
			*s.into = append(*s.into, w.rps)
		}
		fmt.Printf("bench: policy round %d: bare %.0f/s, no policy %.0f/s, limited in memory %.0f/s, limited on Redis %.0f/s\n",
			round+1, res.bareRPS[round], res.openRPS[round], res.limitedRPS[round], res.redisRPS[round])
	}
	for _, l := range []struct {
		key  string
		into *loadgen.Result
	}{{keys["open"], &res.redisOpen}, {keys["limited"], &res.redisLimited}} {
		t := loadgen.Target{URL: redisURL + "/v1/connections", Header: bearer(l.key), WantStatus: http.StatusOK}
		if *l.into, err = loadgen.OpenLoop(ctx, t, 16, lightRate, 10*time.Second); err != nil {
			return err
		}
		if l.into.Errors > 0 {
			return fmt.Errorf("open loop on the Redis-backed server: %d errors", l.into.Errors)
		}
	}
	res.loadAfter = loadAverage()
	res.shares = map[string]map[string]float64{}
	for name, key := range map[string]string{"limited": keys["limited"], "open": keys["open"]} {
		if _, err = r.profileUnderLoad(ctx, "policy-"+name, r.apiURL+"/v1/connections", header(key), r.metricsAddr, o.conns, 10*time.Second); err != nil {
			return err
		}
		if res.shares[name], err = cumShares(ctx, filepath.Join(r.dir, "policy-"+name+"-cpu.pprof")); err != nil {
			return err
		}
	}
	// A request Redis failed to decide was decided in memory: then the figures are not Redis's.
	fallbacks, err := metricSum(ctx, redisMetrics, "switchboard_api_rate_limit_fallbacks_total")
	if err != nil {
		return fmt.Errorf("reading the Redis-backed server's metrics: %w", err)
	}
	res.fallbacks = fallbacks
	r.report.policy = res
	return nil
}

// startRedisServer starts a second switchboard server whose rate limits live in the Redis at
// addr, and returns it, its URL and its metrics address once it is ready.
func (r *rig) startRedisServer(ctx context.Context, redisAddr string) (*proc, string, string, error) {
	var addrs [3]string
	for i := range addrs {
		var err error
		if addrs[i], err = freeAddr(); err != nil {
			return nil, "", "", err
		}
	}
	api, health, metrics := addrs[0], addrs[1], addrs[2]
	srv, err := startProc("server-redis", r.dir, r.kenv, r.bin, "server", "--listen="+api, "--metrics-bind-address="+metrics, "--metrics-secure=false",
		"--health-probe-bind-address="+health, "--auth-failure-rate=-1", "--shutdown-delay=-1s", "--rate-limit-redis=redis://"+redisAddr)
	if err != nil {
		return nil, "", "", err
	}
	if err := waitHTTP(ctx, "http://"+health+"/readyz", 200, 60*time.Second); err != nil {
		srv.stop()
		return nil, "", "", fmt.Errorf("the Redis-backed server did not become ready (see %s): %w", filepath.Join(r.dir, "server-redis.log"), err)
	}
	return srv, "http://" + api, metrics, nil
}

// cumShares reads the cumulative share (in %) of every function of a CPU profile.
func cumShares(ctx context.Context, file string) (map[string]float64, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=100000", file).Output() // #nosec G204 -- the bench profiles its own processes.
	if err != nil {
		return nil, fmt.Errorf("go tool pprof: %w", err)
	}
	shares := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line) // flat flat% sum% cum cum% name
		if len(f) < 6 || !strings.HasSuffix(f[4], "%") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64); err == nil {
			for _, fn := range []string{fnPolicy, fnWriteHeader} {
				if strings.HasSuffix(f[5], fn) {
					shares[fn] = v
				}
			}
		}
	}
	return shares, nil
}

// metricSum adds up the samples of a counter on a Prometheus text endpoint.
func metricSum(ctx context.Context, addr, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		return 0, fmt.Errorf("no %s on %s", name, addr)
	}
	return sum, nil
}

// waitRateLimited waits until the server at base answers key with the RateLimit fields.
func waitRateLimited(ctx context.Context, base, key string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/connections", nil)
		if err != nil {
			return err
		}
		req.Header = bearer(key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && resp.Header.Get("RateLimit-Policy") != "" {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s never answered the limited key with RateLimit fields", base)
}

func (r *report) writePolicy(p printer) {
	res := r.policy
	open, limited := median(res.openRPS), median(res.limitedRPS)
	p("## 9. Per-key rate limits: what the limiter costs")
	p("")
	p("The same %d-byte list of 10 Connections as part 1, `wrk -t1 -c%d -d%s` rounds (%d, rotating who goes first; medians),", res.bodyBytes, res.conns, res.duration, len(res.bareRPS))
	p("for a key without a policy and for a key limited to 1,000,000 a second (never reached: every answer is a 200, with")
	p("its `RateLimit` fields), decided in memory and, on a second server, in a real `redis-server` on loopback")
	p("(`--rate-limit-redis`). Load average before and after: %s, %s.", res.loadBefore, res.loadAfter)
	p("")
	writeRatioRows(p, "handler", "bare", []rpsRow{{"bare `net/http`", res.bareRPS}, {"key without a policy", res.openRPS},
		{"rate-limited key, in memory", res.limitedRPS}, {"rate-limited key, on Redis", res.redisRPS}})
	p("")
	p("The in-memory limiter keeps %.0f%% of a policy-free key's throughput. A key without a policy never reaches the", 100*limited/open)
	p("limiter (two comparisons on the request path), so its figure is part 1's.")
	p("")
	p("Where the difference goes: CPU profiles of the server under the same `wrk` load, 8 s of 10 with each key")
	p("(`go tool pprof -top -cum`; the files are kept in the bench's log directory, `policy-limited-cpu.pprof` and")
	p("`policy-open-cpu.pprof`):")
	p("")
	p("| share of the server's CPU | rate-limited key | key without a policy |")
	p("|---|---|---|")
	p("| the key's rate limiter (`Limiter.Allow`) | %.1f%% | %.1f%% |", res.shares["limited"][fnPolicy], res.shares["open"][fnPolicy])
	p("| `net/http` writing the response header | %.1f%% | %.1f%% |", res.shares["limited"][fnWriteHeader], res.shares["open"][fnWriteHeader])
	p("")
	p("The limiter and the two fields cost little on the server; the rest of the gap is writing and parsing two more")
	p("header fields on every response, by the server and by `wrk`, which shares the same %d cores.", r.cores)
	p("")
	p("Latency on the Redis-backed server, open loop at %d/s for 10 s (`hack/bench/loadgen`, 16 connections):", lightRate)
	p("")
	writeLatencyRows(p, "key", []latencyRow{{"without a policy", res.redisOpen}, {"rate-limited (one Redis round trip)", res.redisLimited}})
	p("")
	p("**Redis adds %s at p50 and %s at p99** (the difference of the rows) on loopback, on the same 2 cores as",
		ms(res.redisLimited.Percentile(0.5)-res.redisOpen.Percentile(0.5)), ms(res.redisLimited.Percentile(0.99)-res.redisOpen.Percentile(0.99)))
	p("everything else; a Redis on another machine adds its network round trip. Per request it waits at most")
	p("`--rate-limit-redis-timeout` (50 ms), then decides in memory.")
	p("")
	if res.fallbacks > 0 {
		p("In this run Redis did not answer within that timeout %.0f times, while `wrk` kept both cores busy; those", res.fallbacks)
		p("requests were decided in memory (`switchboard_api_rate_limit_fallbacks_total`), as designed, and are in the")
		p("Redis rows above: a few against the hundreds of thousands each row counts.")
	} else {
		p("Every request of the Redis-backed server was decided in Redis (no fallback to memory in this run).")
	}
	p("")
}
