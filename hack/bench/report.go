package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/internal/loadgen"
)

// latencyRun is one open-loop rate, measured on both handlers.
type latencyRun struct {
	what               string
	rate               float64
	auth, headed, bare loadgen.Result
}

// report holds what the run measured; write renders it as docs/benchmarks.md.
type report struct {
	cores    int
	total    time.Duration
	conns    int
	duration time.Duration
	rounds   int

	bareRuns, authRuns    []loadRun
	headedRuns            []loadRun // the bare handler with switchboard's response headers
	bodyBytes             int
	loadErrors            int
	authProf, bareProf    cpuProfile // CPU profiles under wrk load
	headedProf            cpuProfile
	loadBefore, loadAfter string
	loadStart             string

	latency []latencyRun

	revocations []time.Duration

	scale *scaleResult

	benchLines []string

	policy *policyResult

	authz *authzResult

	forwardAuth *forwardAuthResult

	// ran names the steps this run measured; the report has a section for each.
	ran map[string]bool
	// failed says, for each step that failed, why; the report lists them.
	failed []string
}

func newReport() *report { return &report{ran: map[string]bool{}} }

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func percentile(ds []time.Duration, q float64) time.Duration {
	return loadgen.Result{Latencies: ds}.Percentile(q)
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	if dirty, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(dirty) > 0 {
		commit += " (with uncommitted changes)"
	}
	return commit
}

// apartMarker ends the heading of a section measured apart from the bench (by a test, say):
// the bench keeps such sections of the report it replaces, as they are.
const apartMarker = "(measured apart from `make bench`)"

// keptSections returns the sections of the report at path whose heading carries apartMarker.
func keptSections(path string) string {
	raw, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return ""
	}
	var kept strings.Builder
	keep := false
	for _, line := range strings.SplitAfter(string(raw), "\n") {
		if strings.HasPrefix(line, "## ") {
			keep = strings.Contains(line, apartMarker)
		}
		if keep {
			kept.WriteString(line)
		}
	}
	return kept.String()
}

func (r *report) write(path string) error {
	kept := keptSections(path)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# switchboard benchmarks")
	p("")
	p("Written by `go run ./hack/bench %s` (what `make bench` runs); every number below is what that run measured,", strings.Join(os.Args[1:], " "))
	p("except in sections marked %s, which say how they were measured and are kept as they are.", apartMarker)
	p("Commit %s, %s. Machine: %s, %d cores (`nproc`), %s of memory; Go %s. The run took %s.", gitCommit(), time.Now().UTC().Format("2006-01-02 15:04 MST"),
		cpuModel(), r.cores, memTotal(), goVersion(), r.total.Round(time.Second))
	p("")
	p("Everything runs on this one machine over loopback: a control plane built from source (etcd + kube-apiserver),")
	p("`bin/switchboard operator` and `bin/switchboard server` as separate processes, and the load generators (`wrk`, and")
	p("`internal/loadgen` in the bench process). They share the cores with the server, so absolute figures are lower than")
	p("with a dedicated client machine; ratios compare runs made side by side, interleaved.")
	p("")
	p("Nothing stops other jobs on the machine from running during a bench, so the report says how busy it was: the load")
	p("average at the start of the run was %s; each section gives its own, and the wrk rows the CPU other processes took.", r.loadStart)
	p("")
	if len(r.failed) > 0 {
		p("**Parts of this run failed, and their sections are missing:**")
		p("")
		for _, f := range r.failed {
			p("- %s", f)
		}
		p("")
	}
	if r.ran["throughput"] {
		r.writeThroughput(p)
	}
	if r.ran["revocation"] {
		r.writeRevocation(p)
	}
	if r.ran["scale"] {
		r.writeScale(p)
	}
	if r.ran["hotpath"] {
		r.writeHotPath(p)
	}
	if r.ran["policy"] {
		r.writePolicy(p)
	}
	if r.ran["authz"] {
		r.writeAuthz(p)
	}
	if r.ran["forwardauth"] {
		r.writeForwardAuth(p)
	}
	b.WriteString(kept)
	p("## Rerunning")
	p("")
	p("- Everything: `make bench` (needs `wrk`; builds the binaries and the control plane when missing). Run it on a")
	p("  machine as quiet as you can: the throughput rounds are interleaved so that ratios stay fair, but other load widens them.")
	p("- One part: `go run ./hack/bench -only scale -out /tmp/scale.md` (parts: %s; comma-separated).", strings.Join(stepNames(), ", "))
	p("- Smaller or longer runs: `go run ./hack/bench -duration 10s -rounds 5 -scale-connections 10000 -scale-namespaces 100 -scale-keys 1000 -scale-largest 1000 -revoke-keys 50`.")
	p("- The CPU and heap profiles behind sections 1 and 4 are kept, with the processes' logs, in the temporary directory the")
	p("  bench prints first (`go tool pprof -top <file>`); `switchboard server --pprof` serves them on the metrics port.")
	p("- Hot path only: `go test -run '^$' -bench . -benchmem ./internal/apikey/ ./internal/keyindex/ ./internal/server/`.")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// printer appends one formatted line to the report.
type printer func(format string, args ...any)

func (r *report) writeThroughput(p printer) {
	bareRPS, headedRPS, authRPS := rpsOf(r.bareRuns), rpsOf(r.headedRuns), rpsOf(r.authRuns)
	bare, headed, auth := median(bareRPS), median(headedRPS), median(authRPS)
	ratiosTo := func(base []float64) []float64 {
		out := make([]float64, len(authRPS))
		for i := range out {
			out[i] = authRPS[i] / base[i]
		}
		return out
	}
	sameRatios, bodyRatios := ratiosTo(headedRPS), ratiosTo(bareRPS)
	authUS, headedUS, bareUS := median(usOf(r.authRuns)), median(usOf(r.headedRuns)), median(usOf(r.bareRuns))
	p("## 1. Throughput: authenticated `GET /v1/connections` vs a bare handler writing the same bytes, by `wrk`")
	p("")
	p("Three servers answer the very same request (`Authorization: Bearer` with a valid key included) with the same")
	p("%d-byte body (10 Connections). `bin/switchboard server` parses the header, checks the checksum, hashes the key,", r.bodyBytes)
	p("looks it up, checks the key's state and policy, and writes the namespace's pre-encoded list with its headers, with")
	p("every protection of production on (time limits, connection bound, header limit, failure limiter, metrics, request")
	p("ids). Its time limits (5 s for headers, 30 s for an answer, 120 s idle) are kept by its listener, whose connections")
	p("record their phase and are closed past its bound, rather than by a deadline `net/http` sets per request (four timer")
	p("changes each, which also wake the network poller). The **same-bytes** handler, a `net/http` server with a 5 s")
	p("`ReadHeaderTimeout`, is a separate process that writes exactly the bytes of a response switchboard gave (captured")
	p("from a real one: every header field, `X-Request-Id` and `ETag` included, assigned from pre-built `[]string`s; only")
	p("`Date` differs): the protocol's own cost. The **body-only** handler writes the body with a `Content-Type`.")
	p("`wrk -t1 -c%d -d%s` (closed loop, one thread), %d rounds, each running the three back to back, alternating the", r.conns, r.duration, r.rounds)
	p("order, after a 2 s warm-up of each; medians. Load average before and after: %s, %s.", r.loadBefore, r.loadAfter)
	p("")
	p("| handler | requests/s (median) | all rounds | server CPU per request (median) |")
	p("|---|---|---|---|")
	p("| bare `net/http`, body only | %.0f | %s | %.1f µs |", bare, floats(bareRPS), bareUS)
	p("| bare `net/http` writing the same bytes | %.0f | %s | %.1f µs |", headed, floats(headedRPS), headedUS)
	p("| switchboard, authenticated | %.0f | %s | %.1f µs |", auth, floats(authRPS), authUS)
	p("")
	p("**Ratio to the same bytes: %.2f** of the medians (target ≥ 0.95), %.2f the median of the per-round ratios (%s).", auth/headed, median(sameRatios), floats2(sameRatios))
	p("**Ratio to the body only: %.2f** of the medians (target ≥ 0.90), %.2f the median of the per-round ratios (%s).", auth/bare, median(bodyRatios), floats2(bodyRatios))
	p("By the servers' own CPU per request (which does not depend on how much CPU a run got): same bytes ÷ switchboard")
	p("%.2f, body only ÷ switchboard %.2f; switchboard spends %.1f µs per request beyond writing the same bytes. Failed or", headedUS/authUS, bareUS/authUS, authUS-headedUS)
	p("unexpected responses during all load runs: %d.", r.loadErrors)
	p("")
	p("wrk's figure is throughput on a machine the load generator (and any other job) shares: how many requests a run")
	p("got depends on how much CPU the server got. So each run also records the server's own CPU time per request and")
	p("the CPU every other process took meanwhile:")
	p("")
	p("| round | body only: req/s, µs/req, others' cores | same bytes: req/s, µs/req, others' cores | switchboard: req/s, µs/req, others' cores |")
	p("|---|---|---|---|")
	for i := range r.authRuns {
		cell := func(l loadRun) string {
			return fmt.Sprintf("%.0f, %.1f, %.2f", l.rps, l.usPerRequest(), l.othersCores())
		}
		p("| %d | %s | %s | %s |", i+1, cell(r.bareRuns[i]), cell(r.headedRuns[i]), cell(r.authRuns[i]))
	}
	p("")
	p("### Where the CPU goes")
	p("")
	p("CPU profiles of each server process under the same `wrk` load (8 s of a 10 s run each), divided by the requests it")
	p("answered meanwhile: microseconds of CPU per request, by what they were spent on (cumulative: a row includes what it")
	p("calls, so rows overlap). The difference is switchboard's beyond the same bytes.")
	p("")
	a, h, b := r.authProf, r.headedProf, r.bareProf
	const srv = "github.com/switchboard-dev/switchboard/internal/server."
	rows := []struct {
		what string
		fn   string
	}{
		{"serving connections (`net/http.(*conn).serve`)", "net/http.(*conn).serve"},
		{"… reading and parsing requests (`(*conn).readRequest`)", "net/http.(*conn).readRequest"},
		{"… the handler (`serverHandler.ServeHTTP`)", "net/http.serverHandler.ServeHTTP"},
		{"… … authentication: parse, checksum, SHA-256, lookup", srv + "authenticate"},
		{"… … … of which SHA-256", "crypto/sha256.Sum256"},
		{"… … the list and its headers (`listConnections`)", srv + "(*api).listConnections"},
		{"… … request id", srv + "requestID"},
		{"… … metrics and access log (`record`)", srv + "(*instrumented).record"},
		{"… writing the response (`(*response).finishRequest`)", "net/http.(*response).finishRequest"},
		{"… … its headers (`(*chunkWriter).writeHeader`)", "net/http.(*chunkWriter).writeHeader"},
		{"system calls (`Syscall6`: read, write, epoll)", "internal/runtime/syscall/linux.Syscall6"},
		{"allocation (`mallocgc`)", "runtime.mallocgc"},
		{"garbage collection (`gcBgMarkWorker`)", "runtime.gcBgMarkWorker"},
		{"clock reads (`time.Now`)", "time.Now"},
	}
	p("| µs of CPU per request | switchboard | same bytes | difference | body only |")
	p("|---|---|---|---|---|")
	if a.requests > 0 && h.requests > 0 && b.requests > 0 {
		at, ht, bt := a.total.Seconds()/a.requests*1e6, h.total.Seconds()/h.requests*1e6, b.total.Seconds()/b.requests*1e6
		p("| **all of the process** | **%.2f** | **%.2f** | **%+.2f** | %.2f |", at, ht, at-ht, bt)
	}
	for _, row := range rows {
		x, y, z := a.perRequest(row.fn), h.perRequest(row.fn), b.perRequest(row.fn)
		p("| %s | %.2f | %.2f | %+.2f | %.2f |", row.what, x, y, x-y, z)
	}
	p("")
	if a.requests > 0 {
		headers, check := headedUS-bareUS, a.perRequest(srv+"authenticate")
		p("**What the body-only ratio leaves.** By CPU per request, the same-bytes handler spends %.1f µs more than the", headers)
		p("body-only one: the header fields the contract requires (`Cache-Control`, `ETag`, `Vary`, `X-Content-Type-Options`,")
		p("`X-Request-Id`), which `net/http` sorts, checks and writes whatever the handler. The key check the contract requires")
		p("(parse, checksum, SHA-256, one index lookup: the authentication row) costs %.2f µs. A server doing nothing but those", check)
		p("two would be at %.2f of the body only (%.1f ÷ (%.1f + %.2f)); the 0.90 target leaves %.2f µs for both. Beyond them", bareUS/(headedUS+check), bareUS, headedUS, check, bareUS/0.9-bareUS)
		p("switchboard spends %.2f µs (selecting the namespace's list, the request id, metrics). Tried, and kept: the time limits", authUS-headedUS-check)
		p("kept by the listener instead of `net/http`'s deadlines per request (0.4–0.7 µs less per request); pre-built header")
		p("values per list, request ids taken 64 at a time from a pooled batch, metrics with pre-bound children (0 allocations in the")
		p("handler, section 8).")
		p("")
	}
	for _, prof := range []struct {
		name string
		top  []string
	}{{"switchboard server", a.top}, {"same-bytes `net/http`", h.top}} {
		p("The top of the %s's profile (`go tool pprof -top`, flat):", prof.name)
		p("")
		p("```")
		for _, l := range prof.top {
			p("%s", l)
		}
		p("```")
		p("")
	}
	p("## 2. Latency under open-loop load")
	p("")
	p("From the in-repo generator (`internal/loadgen`, 16 connections), which saturates itself far below `wrk`, so it runs")
	p("only at rates it sustains. Open loop for 10 s at each rate, every connection sending on its own schedule. A request whose connection")
	p("was still busy at its scheduled start is measured from that start, so a stall is not hidden by the client")
	p("waiting for it (coordinated omission); a request whose connection was free is measured from when its")
	p("sender woke, because Go's timers may wake a millisecond late and that delay is the load generator's. The")
	p("light-load row shows the server's own latency; at a quarter of the maximum the load generator competes with the")
	p("server for the same %d cores, which the bare handlers' rows make visible.", r.cores)
	p("")
	p("| load | handler | requests | p50 | p99 | p99.9 | max |")
	p("|---|---|---|---|---|---|---|")
	for _, run := range r.latency {
		for _, row := range []struct {
			name string
			res  loadgen.Result
		}{{"switchboard, authenticated", run.auth}, {"bare `net/http`, same bytes", run.headed}, {"bare `net/http`, body only", run.bare}} {
			p("| %s, %.0f/s | %s | %d | %s | %s | %s | %s |", run.what, run.rate, row.name, row.res.Requests,
				ms(row.res.Percentile(0.5)), ms(row.res.Percentile(0.99)), ms(row.res.Percentile(0.999)), ms(row.res.Percentile(1)))
		}
	}
	p("")
	if len(r.latency) > 0 && r.latency[0].headed.Requests > 0 {
		l := r.latency[0]
		p("At %.0f/s switchboard's p99 is %.2f of the same-bytes handler's (target: within 10%%, ≤ 1.10). Target: p99 ≤ 1 ms under load.",
			l.rate, float64(l.auth.Percentile(0.99))/float64(l.headed.Percentile(0.99)))
	}
	p("")
}

func (r *report) writeRevocation(p printer) {
	p("## 3. Revocation latency")
	p("")
	p("For each of %d keys, one client polls `/v1/connections` every millisecond while the bench patches", len(r.revocations))
	p("`spec.revoked: true`; the figure is from the start of the patch to the first 401. The server learns of the")
	p("revocation from its APIKey informer (and the operator's deletion of the hash Secret), whichever comes first.")
	p("")
	rev := slices.Clone(r.revocations)
	slices.Sort(rev)
	p("| keys | p50 | p99 | max |")
	p("|---|---|---|---|")
	p("| %d | %s | %s | %s |", len(rev), ms(percentile(rev, 0.5)), ms(percentile(rev, 0.99)), ms(percentile(rev, 1)))
	p("")
	p("Target: p99 ≤ 1 s.")
	p("")
}

func (r *report) writeHotPath(p printer) {
	p("## 8. Hot path (`go test -bench . -benchmem`)")
	p("")
	p("```")
	for _, l := range r.benchLines {
		p("%s", l)
	}
	p("```")
	p("")
	p("What allocates, and why it stays:")
	p("")
	p("- Parsing the header, the checksum, SHA-256, the index lookup and the key's checks (`ParseAndSum`, `Lookup`,")
	p("  `Authenticate`) allocate nothing, nor does copying a ready list (`AppendList`).")
	p("- `ServeConnections` is the whole handler without `net/http`'s own work, and a full list allocates nothing of its")
	p("  own: request ids are cut 64 at a time from one string, each already in its one-element header value (the")
	p("  34 B/op are those batches, shared out); the wrapper that records the status for metrics and logs is pooled; the")
	p("  metric series are bound once, not looked up per request; the wall clock is read once, at the start. The constant")
	p("  headers, the namespace's list body, and each selector's `ETag` and `Content-Length` are made once per namespace")
	p("  snapshot and selector and shared; a list is written from the shared pre-encoded Connections, never copied per")
	p("  request.")
	p("- A page (`?limit=`) is selected per request: its items, `ETag`, cursor and `Link` header (no body: its items are")
	p("  written in turn).")
	p("- `EncodeConnection` runs when a Connection changes (from the informer), never per request.")
	p("")
}

func rpsOf(runs []loadRun) []float64 {
	out := make([]float64, len(runs))
	for i, l := range runs {
		out[i] = l.rps
	}
	return out
}

func usOf(runs []loadRun) []float64 {
	out := make([]float64, len(runs))
	for i, l := range runs {
		out[i] = l.usPerRequest()
	}
	return out
}

func floats2(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ")
}

// cpuModel is the processor's name from /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// memTotal is MemTotal from /proc/meminfo.
func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return fmtBytes(kb << 10)
		}
	}
	return "unknown"
}

func floats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(s, ", ")
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// latencyRow is one open-loop run named for a latency table.
type latencyRow struct {
	name string
	res  loadgen.Result
}

// writeLatencyRows writes a table of open-loop runs: requests, p50, p99 and p99.9, the first
// column headed what.
func writeLatencyRows(p printer, what string, rows []latencyRow) {
	p("| %s | requests | p50 | p99 | p99.9 |", what)
	p("|---|---|---|---|---|")
	for _, row := range rows {
		p("| %s | %d | %s | %s | %s |", row.name, row.res.Requests, ms(row.res.Percentile(0.5)), ms(row.res.Percentile(0.99)), ms(row.res.Percentile(0.999)))
	}
}
