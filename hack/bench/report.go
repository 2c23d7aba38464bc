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

	"github.com/switchboard-dev/switchboard/hack/bench/loadgen"
)

// report holds what the run measured; write renders it as docs/benchmarks.md.
type report struct {
	cores    int
	total    time.Duration
	conns    int
	duration time.Duration
	rounds   int

	bareRuns, authRuns    []loadRun
	headedRuns            []loadRun // the bare handler with switchboard's response headers
	unlimitedRuns         []loadRun // the same, with no limits at all (net/http's defaults)
	bodyBytes             int
	loadErrors            int
	authProf, bareProf    cpuProfile // CPU profiles under wrk load
	headedProf            cpuProfile
	unlimitedProf         cpuProfile
	loadBefore, loadAfter string
	loadStart             string

	latency []latencyRun

	revocations []time.Duration

	scale *scaleResult

	benchLines []string

	policy *policyResult

	authz *authzResult

	forwardAuth *forwardAuthResult

	credits *creditsResult

	binding *bindingResult

	// ran names the steps this run measured; the report has a section for each.
	ran map[string]bool
	// only names the steps -only chose; none when the run measured every one.
	only []string
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

// reportPart is what one step contributes to the report.
type reportPart struct {
	step  string
	write func(printer)
}

// parts lists the report's parts in the order of their sections.
func (r *report) parts() []reportPart {
	return []reportPart{
		{"throughput", r.writeThroughput},
		{"revocation", r.writeRevocation},
		{"scale", r.writeScale},
		{"hotpath", r.writeHotPath},
		{"policy", r.writePolicy},
		{"authz", r.writeAuthz},
		{"forwardauth", r.writeForwardAuth},
		{"credits", r.writeCredits},
		{"binding", r.writeBinding},
	}
}

// write renders the report to path. A run of every part replaces the report there but for its
// sections measured apart. A run of some parts (-only) into an existing report replaces only
// those parts' sections, each marked as a later run's, and keeps the header and every other
// section as they were: rerunning the throughput does not throw away the scale part's 30
// minutes. Into a new file, a run of some parts writes only their sections.
func (r *report) write(path string) error {
	prior := readPrior(path)
	splice := len(r.only) > 0 && strings.HasPrefix(prior.header, reportTitle)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	if splice {
		b.WriteString(prior.header)
	} else {
		r.writeHeader(p)
	}
	note := fmt.Sprintf("*This section is from a later run of only some parts, not the run described at the top: `go run ./hack/bench %s`, commit %s, %s; load average %s at its start.*",
		strings.Join(os.Args[1:], " "), gitCommit(), time.Now().UTC().Format("2006-01-02 15:04 MST"), r.loadStart)
	for _, part := range r.parts() {
		switch {
		case r.ran[part.step] && splice:
			var s strings.Builder
			part.write(func(format string, args ...any) { fmt.Fprintf(&s, format+"\n", args...) })
			b.WriteString(markRerun(s.String(), note))
		case r.ran[part.step]:
			part.write(p)
		case splice:
			b.WriteString(prior.steps[part.step])
		}
	}
	b.WriteString(prior.apart)
	p("## Rerunning")
	p("")
	p("- Everything: `make bench` (needs `wrk`; builds the binaries and the control plane when missing). Run it on a")
	p("  machine as quiet as you can: the throughput rounds are interleaved so that ratios stay fair, but other load widens them.")
	p("- Some parts: `go run ./hack/bench -only throughput` (parts: %s; comma-separated)", strings.Join(stepNames(), ", "))
	p("  replaces only those parts' sections of the report `-out` names (docs/benchmarks.md by default), marking each as a")
	p("  later run's, and keeps the rest; into a new file (`-out /tmp/throughput.md`) it writes only them.")
	p("- Smaller or longer runs: `go run ./hack/bench -duration 10s -rounds 5 -scale-connections 10000 -scale-namespaces 100 -scale-keys 1000 -scale-largest 1000 -revoke-keys 50`.")
	p("- The CPU and heap profiles behind sections 1 and 4 are kept, with the processes' logs, in the temporary directory the")
	p("  bench prints first (`go tool pprof -top <file>`); `switchboard server --pprof` serves them on the metrics port.")
	p("- Hot path only: `go test -run '^$' -bench . -benchmem ./internal/apikey/ ./internal/server/keyindex/ ./internal/server/keycheck/ ./internal/server/v1api/ ./internal/server/indexfeed/`.")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// reportTitle opens every report; a file that does not start with it is not spliced into.
const reportTitle = "# switchboard benchmarks\n"

// writeHeader writes the report's title and the run it describes.
func (r *report) writeHeader(p printer) {
	p("%s", strings.TrimSuffix(reportTitle, "\n"))
	p("")
	p("Written by `go run ./hack/bench %s` (what `make bench` runs); every number below is what that run measured,", strings.Join(os.Args[1:], " "))
	p("except in sections marked %s, which say how they were measured and are kept as they are.", apartMarker)
	p("Commit %s, %s. Machine: %s, %d cores (`nproc`), %s of memory; Go %s. The run took %s.", gitCommit(), time.Now().UTC().Format("2006-01-02 15:04 MST"),
		cpuModel(), r.cores, memTotal(), goVersion(), r.total.Round(time.Second))
	p("")
	p("Everything runs on this one machine over loopback: a control plane built from source (etcd + kube-apiserver),")
	p("`bin/switchboard operator` and `bin/switchboard server` as separate processes, and the load generators (`wrk`, and")
	p("`hack/bench/loadgen` in the bench process). They share the cores with the server, so absolute figures are lower than")
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
}

// printer appends one formatted line to the report.
type printer func(format string, args ...any)

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
	writeCode(p, r.benchLines)
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

// floats writes xs comma-separated, each with places decimals.
func floats(xs []float64, places int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.*f", places, x)
	}
	return strings.Join(s, ", ")
}

// writeCode writes lines as a fenced block, and a blank line after it.
func writeCode(p printer, lines []string) {
	p("```")
	for _, l := range lines {
		p("%s", l)
	}
	p("```")
	p("")
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// rpsRow is one side's wrk rounds named for a throughput table.
type rpsRow struct {
	name string
	rps  []float64
}

// writeRatioRows writes a table of wrk rounds: each row's median requests per second, its ratio
// to the first row's (which the column names base), and every round; the first column headed what.
func writeRatioRows(p printer, what, base string, rows []rpsRow) {
	p("| %s | requests/s (median) | ratio to %s | all rounds |", what, base)
	p("|---|---|---|---|")
	for _, row := range rows {
		p("| %s | %.0f | %.2f | %s |", row.name, median(row.rps), median(row.rps)/median(rows[0].rps), floats(row.rps, 0))
	}
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
