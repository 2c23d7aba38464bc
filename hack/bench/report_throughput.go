package main

import (
	"fmt"
	"math"

	"github.com/switchboard-dev/switchboard/hack/bench/loadgen"
)

// latencyRun is one open-loop rate, measured on both handlers.
type latencyRun struct {
	what               string
	rate               float64
	auth, headed, bare loadgen.Result
}

// Section 1 as the report written at commit 98e4b76 gave it (docs/benchmarks.md before issue
// 29's front door, a run on a quiet machine): switchboard's throughput over the same-bytes
// handler's and the body-only handler's, ratio of the medians. The baseline with no limits did
// not exist then.
const (
	sameBytesAt98e4b76 = 0.96
	bodyOnlyAt98e4b76  = 0.89
)

// ratios is switchboard's throughput over a baseline's, from runs made side by side.
type ratios struct {
	ofMedians float64   // switchboard's median ÷ the baseline's median
	rounds    []float64 // each round's ratio, switchboard's run ÷ the baseline's
}

// ratiosTo compares switchboard's requests per second, round by round, with a baseline's.
func ratiosTo(auth, base []float64) ratios {
	r := ratios{ofMedians: median(auth) / median(base), rounds: make([]float64, len(auth))}
	for i := range auth {
		r.rounds[i] = auth[i] / base[i]
	}
	return r
}

// round2 is x as the report prints it (%.2f): targets and earlier figures, given to two
// places, are compared with what the reader sees.
func round2(x float64) float64 { return math.Round(x*100) / 100 }

// verdict says how a ratio fares against its target and against its figure at an earlier
// commit (none when before is 0), compared as printed.
func verdict(ratio, target, before float64, at string) string {
	v := fmt.Sprintf("target ≥ %.2f: ", target)
	if round2(ratio) >= target {
		v += "met"
	} else {
		v += "**not met**"
	}
	if before == 0 {
		return v + "; no figure before"
	}
	v += fmt.Sprintf("; %.2f at %s: ", before, at)
	switch r := round2(ratio); {
	case r > before:
		return v + "higher"
	case r == before:
		return v + "the same"
	}
	return v + "**lower**"
}

func (r *report) writeThroughput(p printer) {
	bareRPS, headedRPS, unlimitedRPS, authRPS := rpsOf(r.bareRuns), rpsOf(r.headedRuns), rpsOf(r.unlimitedRuns), rpsOf(r.authRuns)
	toUnlimited, toSame, toBody := ratiosTo(authRPS, unlimitedRPS), ratiosTo(authRPS, headedRPS), ratiosTo(authRPS, bareRPS)
	authUS, headedUS, bareUS := median(usOf(r.authRuns)), median(usOf(r.headedRuns)), median(usOf(r.bareRuns))
	unlimitedUS := median(usOf(r.unlimitedRuns))
	p("## 1. Throughput: authenticated `GET /v1/connections` vs bare handlers writing the same bytes, by `wrk`")
	p("")
	p("Four servers answer the very same request (`Authorization: Bearer` with a valid key included) with the same")
	p("%d-byte body (10 Connections). `bin/switchboard server` parses the header, checks the checksum, hashes the key,", r.bodyBytes)
	p("looks it up, checks the key's state and policy, and writes the namespace's pre-encoded list with its headers, with")
	p("every protection of production on: its front door (`internal/frontdoor`: connections bounded in all and per client,")
	p("counted as they are accepted; 32 KiB socket buffers; time limits; a request with a body refused before any handler),")
	p("the header limit, the failure limiter, metrics, request ids. Its time limits (5 s for headers, 30 s for an answer,")
	p("120 s idle) are kept by the door, whose connections record their phase and are closed past its bound by one")
	p("watcher, rather than by a deadline `net/http` sets per request (four timer changes each, which also wake the")
	p("network poller). The three others are bare `net/http` servers, each a process of its own:")
	p("")
	p("- **Same bytes, no limits**, the baseline of the headline: an `http.Server` with its handler and nothing else set")
	p("  (no `ReadHeaderTimeout`: `net/http`'s defaults), writing exactly the bytes of a response switchboard gave")
	p("  (captured from a real one: every header field, `X-Request-Id` and `ETag` included, assigned from pre-built")
	p("  `[]string`s; only `Date` differs). It is the physical limit: the protocol's own cost and nothing more, no")
	p("  protection at all, so switchboard is judged against it.")
	p("- **Same bytes**, the baseline of the reports before issue 29: the same with a 5 s `ReadHeaderTimeout`, as a server")
	p("  facing clients must have, for which `net/http` sets a read deadline at every request: a cost switchboard's door")
	p("  does not pay, which flatters the ratio to it. Kept to compare with before.")
	p("- **Body only**: the body with a `Content-Type` and nothing else, and the 5 s `ReadHeaderTimeout`: with the same")
	p("  bytes, it shows what the header fields the contract requires cost.")
	p("")
	p("`wrk -t1 -c%d -d%s` (closed loop, one thread), %d rounds, each running the four back to back, alternating the", r.conns, r.duration, r.rounds)
	p("order, after a 2 s warm-up of each; medians. Load average before and after: %s, %s.", r.loadBefore, r.loadAfter)
	p("")
	p("| handler | requests/s (median) | all rounds | server CPU per request (median) |")
	p("|---|---|---|---|")
	p("| bare `net/http`, body only | %.0f | %s | %.1f µs |", median(bareRPS), floats(bareRPS, 0), bareUS)
	p("| bare `net/http` writing the same bytes | %.0f | %s | %.1f µs |", median(headedRPS), floats(headedRPS, 0), headedUS)
	p("| bare `net/http` writing the same bytes, no limits | %.0f | %s | %.1f µs |", median(unlimitedRPS), floats(unlimitedRPS, 0), unlimitedUS)
	p("| switchboard, authenticated | %.0f | %s | %.1f µs |", median(authRPS), floats(authRPS, 0), authUS)
	p("")
	p("The ratios, each against its target (which lives here, in the report, never in a test) and against section 1 of")
	p("the report written at commit 98e4b76, before issue 29's front door, on a quiet machine:")
	p("")
	p("- **Ratio to the same bytes with no limits: %.2f** of the medians, %.2f the median of the per-round ratios (%s);",
		round2(toUnlimited.ofMedians), round2(median(toUnlimited.rounds)), floats(toUnlimited.rounds, 2))
	p("  %s: this baseline is new, and the same-bytes target is judged against it.", verdict(toUnlimited.ofMedians, 0.95, 0, ""))
	p("- **Ratio to the same bytes: %.2f** of the medians, %.2f the median of the per-round ratios (%s);",
		round2(toSame.ofMedians), round2(median(toSame.rounds)), floats(toSame.rounds, 2))
	p("  %s.", verdict(toSame.ofMedians, 0.95, sameBytesAt98e4b76, "98e4b76"))
	p("- **Ratio to the body only: %.2f** of the medians, %.2f the median of the per-round ratios (%s);",
		round2(toBody.ofMedians), round2(median(toBody.rounds)), floats(toBody.rounds, 2))
	p("  %s.", verdict(toBody.ofMedians, 0.90, bodyOnlyAt98e4b76, "98e4b76"))
	p("")
	p("By the servers' own CPU per request (which does not depend on how much CPU a run got): same bytes with no limits ÷")
	p("switchboard %.2f, same bytes ÷ switchboard %.2f, body only ÷ switchboard %.2f. Switchboard spends %.1f µs per request", unlimitedUS/authUS, headedUS/authUS, bareUS/authUS, authUS-unlimitedUS)
	p("beyond writing the same bytes with no limits; `ReadHeaderTimeout`'s deadline per request costs the same-bytes server")
	p("%.1f µs (its CPU per request less that of the one with no limits). Failed or unexpected responses during all load", headedUS-unlimitedUS)
	p("runs: %d.", r.loadErrors)
	p("")
	p("wrk's figure is throughput on a machine the load generator (and any other job) shares: how many requests a run")
	p("got depends on how much CPU the server got. So each run also records the server's own CPU time per request and")
	p("the CPU every other process took meanwhile (req/s, µs/req, others' cores):")
	p("")
	p("| round | body only | same bytes | same bytes, no limits | switchboard |")
	p("|---|---|---|---|---|")
	for i := range r.authRuns {
		cell := func(l loadRun) string {
			return fmt.Sprintf("%.0f, %.1f, %.2f", l.rps, l.usPerRequest(), l.othersCores())
		}
		p("| %d | %s | %s | %s | %s |", i+1, cell(r.bareRuns[i]), cell(r.headedRuns[i]), cell(r.unlimitedRuns[i]), cell(r.authRuns[i]))
	}
	p("")
	p("### Where the CPU goes")
	p("")
	p("CPU profiles of each server process under the same `wrk` load (8 s of a 10 s run each), divided by the requests it")
	p("answered meanwhile: microseconds of CPU per request, by what they were spent on (cumulative: a row includes what it")
	p("calls, so rows overlap). The difference is switchboard's beyond the same bytes with no limits.")
	p("")
	a, u, h, b := r.authProf, r.unlimitedProf, r.headedProf, r.bareProf
	const (
		keycheckPkg = "github.com/switchboard-dev/switchboard/internal/server/keycheck."
		v1apiPkg    = "github.com/switchboard-dev/switchboard/internal/server/v1api."
	)
	rows := []struct {
		what string
		fn   string
	}{
		{"serving connections (`net/http.(*conn).serve`)", "net/http.(*conn).serve"},
		{"… the front door's phase marks (`(*httpDoor).connState`)", "github.com/switchboard-dev/switchboard/internal/frontdoor.(*httpDoor).connState"},
		{"… reading and parsing requests (`(*conn).readRequest`)", "net/http.(*conn).readRequest"},
		{"… the handler (`serverHandler.ServeHTTP`)", "net/http.serverHandler.ServeHTTP"},
		{"… … authentication: parse, checksum, SHA-256, lookup", keycheckPkg + "authenticate"},
		{"… … … of which SHA-256", "crypto/sha256.Sum256"},
		{"… … the list and its headers (`listConnections`)", v1apiPkg + "(*api).listConnections"},
		{"… … request id", v1apiPkg + "requestID"},
		{"… … metrics and access log (`record`)", v1apiPkg + "(*instrumented).record"},
		{"… writing the response (`(*response).finishRequest`)", "net/http.(*response).finishRequest"},
		{"… … its headers (`(*chunkWriter).writeHeader`)", "net/http.(*chunkWriter).writeHeader"},
		{"system calls (`Syscall6`: read, write, epoll)", "internal/runtime/syscall/linux.Syscall6"},
		{"allocation (`mallocgc`)", "runtime.mallocgc"},
		{"garbage collection (`gcBgMarkWorker`)", "runtime.gcBgMarkWorker"},
		{"clock reads (`time.Now`)", "time.Now"},
	}
	p("| µs of CPU per request | switchboard | same bytes, no limits | difference | same bytes | body only |")
	p("|---|---|---|---|---|---|")
	if a.requests > 0 && u.requests > 0 && h.requests > 0 && b.requests > 0 {
		perReq := func(c cpuProfile) float64 { return c.total.Seconds() / c.requests * 1e6 }
		at, ut := perReq(a), perReq(u)
		p("| **all of the process** | **%.2f** | **%.2f** | **%+.2f** | %.2f | %.2f |", at, ut, at-ut, perReq(h), perReq(b))
	}
	for _, row := range rows {
		x, y := a.perRequest(row.fn), u.perRequest(row.fn)
		p("| %s | %.2f | %.2f | %+.2f | %.2f | %.2f |", row.what, x, y, x-y, h.perRequest(row.fn), b.perRequest(row.fn))
	}
	p("")
	if a.requests > 0 {
		headers, check := headedUS-bareUS, a.perRequest(keycheckPkg+"authenticate")
		p("**What the body-only ratio leaves.** By CPU per request, the same-bytes handler spends %.1f µs more than the", headers)
		p("body-only one: the header fields the contract requires (`Cache-Control`, `ETag`, `Vary`, `X-Content-Type-Options`,")
		p("`X-Request-Id`), which `net/http` sorts, checks and writes whatever the handler. The key check the contract requires")
		p("(parse, checksum, SHA-256, one index lookup: the authentication row) costs %.2f µs. A server doing nothing but those", check)
		p("two would be at %.2f of the body only (%.1f ÷ (%.1f + %.2f)); the 0.90 target leaves %.2f µs for both. Beyond them", bareUS/(headedUS+check), bareUS, headedUS, check, bareUS/0.9-bareUS)
		p("switchboard spends %.2f µs (selecting the namespace's list, the request id, metrics). Tried, and kept: the time limits", authUS-headedUS-check)
		p("kept by the front door instead of `net/http`'s deadlines per request (0.4–0.7 µs less per request); pre-built header")
		p("values per list, request ids taken 64 at a time from a pooled batch, metrics with pre-bound children (0 allocations in the")
		p("handler, section 8).")
		p("")
	}
	for _, prof := range []struct {
		name string
		top  []string
	}{{"switchboard server", a.top}, {"same-bytes `net/http` server with no limits", u.top}, {"same-bytes `net/http` server", h.top}} {
		p("The top of the profile of the %s (`go tool pprof -top`, flat):", prof.name)
		p("")
		writeCode(p, prof.top)
	}
	p("## 2. Latency under open-loop load")
	p("")
	p("From the in-repo generator (`hack/bench/loadgen`, 16 connections), which saturates itself far below `wrk`, so it runs")
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
