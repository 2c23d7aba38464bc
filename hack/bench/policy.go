package main

import (
	"context"
	"fmt"
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
	const ns = "bench-policy"
	c, keys, err := r.tenant(ctx, ns, 10, "open", "limited")
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

	bare, bareAddr, err := r.startBare(ctx, "policy-bare", "policy-body.json", body)
	if err != nil {
		return err
	}
	defer bare.stop()

	addrs, err := freeAddrs(2)
	if err != nil {
		return err
	}
	redisAddr, redisMetrics := addrs[0], addrs[1]
	redis, err := startRedis(ctx, r.dir, "redis-server", redisAddr)
	if err != nil {
		return err
	}
	defer redis.stop()
	// A second server, whose rate limits live in that Redis.
	onRedis, redisURL, err := r.startServer(ctx, "server-redis", "--metrics-bind-address="+redisMetrics, "--metrics-secure=false", "--rate-limit-redis=redis://"+redisAddr)
	if err != nil {
		return err
	}
	defer onRedis.stop()
	if err := waitRateLimited(ctx, redisURL, keys["limited"]); err != nil {
		return err
	}

	res := &policyResult{loadBefore: loadAverage(), bodyBytes: len(body), conns: o.conns, duration: o.duration}
	if err := wrkRounds(ctx, "policy", o, []wrkSide{
		{"bare", "http://" + bareAddr + "/v1/connections", "", &res.bareRPS},
		{"no policy", r.apiURL + "/v1/connections", bearerLine(keys["open"]), &res.openRPS},
		{"limited in memory", r.apiURL + "/v1/connections", bearerLine(keys["limited"]), &res.limitedRPS},
		{"limited on Redis", redisURL + "/v1/connections", bearerLine(keys["limited"]), &res.redisRPS},
	}); err != nil {
		return err
	}
	errs, err := openLoops(ctx, lightRate, openRun{redisURL + "/v1/connections", keys["open"], &res.redisOpen},
		openRun{redisURL + "/v1/connections", keys["limited"], &res.redisLimited})
	if err != nil {
		return err
	}
	if errs > 0 {
		return fmt.Errorf("open loop on the Redis-backed server: %d errors", errs)
	}
	res.loadAfter = loadAverage()
	res.shares = map[string]map[string]float64{}
	for name, key := range map[string]string{"limited": keys["limited"], "open": keys["open"]} {
		if _, err = r.profileUnderLoad(ctx, "policy-"+name, r.apiURL+"/v1/connections", bearerLine(key), r.metricsAddr, o.conns, 10*time.Second); err != nil {
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

// startRedis starts a redis-server without persistence on addr, its log named name, and waits
// until it accepts connections.
func startRedis(ctx context.Context, dir, name, addr string) (*proc, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	redis, err := startProc(name, dir, nil, "redis-server", "--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return nil, fmt.Errorf("starting redis-server (apt-get install redis-server): %w", err)
	}
	if err := redis.WaitUntil(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}); err != nil {
		redis.stop()
		return nil, err
	}
	return redis, nil
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
	metrics, err := get(ctx, "http://"+addr+"/metrics", "")
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	for _, line := range strings.Split(string(metrics.body), "\n") {
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
		if a, err := get(ctx, base+"/v1/connections", key); err == nil && a.code == http.StatusOK && a.header.Get("RateLimit-Policy") != "" {
			return nil
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
