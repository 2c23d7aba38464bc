package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

func perObject(delta int64, n int) string {
	if n == 0 {
		return "–"
	}
	return fmtBytes(delta / int64(n))
}

func (r *report) writeScale(p printer) {
	s := r.scale
	o := s.o
	p("## 4. Scale: %d Connections in %d namespaces, %d APIKeys", o.connections, o.namespaces, o.keys)
	p("")
	p("One control plane, one operator, one server, as in production but on this machine. The largest namespace")
	p("holds %d Connections; the others share the rest evenly; every namespace has %d APIKeys. The bench's", o.largest, o.keys/o.namespaces)
	p("client creates everything in parallel (64 creates in flight, client rate limit 5,000/s). Set-up:")
	p("")
	p("| step | took | rate |")
	p("|---|---|---|")
	p("| %d namespaces | %s | %.0f/s |", o.namespaces, s.nsSetup.Round(time.Millisecond), float64(o.namespaces)/s.nsSetup.Seconds())
	p("| %d APIKeys created | %s | %.0f/s |", o.keys, s.keysCreate.Round(time.Millisecond), float64(o.keys)/s.keysCreate.Seconds())
	p("| … all issued and Ready (section 5) | %s | %.0f/s |", s.keysReady.Round(time.Millisecond), float64(o.keys)/s.keysReady.Seconds())
	p("| %d keys claimed from their reveal Secrets | %s | %.0f/s |", o.keys, s.claim.Round(time.Millisecond), float64(o.keys)/s.claim.Seconds())
	p("| %d Connections created | %s | %.0f/s |", o.connections, s.connsCreate.Round(time.Millisecond), float64(o.connections)/s.connsCreate.Seconds())
	p("| … all given an id by the operator and listed by the server | %s | %.0f/s |", s.connsReady.Round(time.Millisecond), float64(o.connections)/s.connsReady.Seconds())
	p("")
	p("Load average (1 min) before the scale part, after the fill and at its end: %s, %s, %s (2 cores; everything", s.loadBefore, s.loadMid, s.loadAfter)
	p("above runs on them at once).")
	p("")
	p("### Server memory and start-up")
	p("")
	p("Live heap: the heap allocated right after a forced GC (`HeapAlloc` in `/debug/pprof/heap?gc=1&debug=1`, served with")
	p("`--pprof`); RSS from `/proc`. A key's share includes its hash Secret; a Connection's is the cache's compact record of it (its /v1 JSON) and")
	p("its share of the namespace's cached list bodies. A fresh server is a new process started against the cluster as it")
	p("stands, timed from `exec` to `/readyz` answering 200 (every informer synced and the index built): how long a rolling")
	p("upgrade waits for each new replica. Its memory is the figure without the churn of the fill, and the per-object")
	p("figures below are taken from fresh servers.")
	p("")
	p("| server | holds | ready after | its CPU until ready | kube-apiserver CPU meanwhile | live heap | RSS |")
	p("|---|---|---|---|---|---|---|")
	p("| the running one, before | nothing | – | – | – | %s | %s |", fmtBytes(s.base.live), fmtBytes(s.base.rss))
	p("| the running one, after the keys | %d APIKeys | – | – | – | %s | %s |", o.keys, fmtBytes(s.afterKeys.live), fmtBytes(s.afterKeys.rss))
	p("| the running one, after the fill | + %d Connections | – | – | – | %s | %s |", o.connections, fmtBytes(s.afterConns.live), fmtBytes(s.afterConns.rss))
	fresh := func(label, holds string, f freshStart) {
		p("| %s | %s | %s | %s | %s | %s | %s |", label, holds, f.ready.Round(time.Millisecond), f.serverCPU.Round(10*time.Millisecond),
			f.apiserverCPU.Round(10*time.Millisecond), fmtBytes(f.mem.live), fmtBytes(f.mem.rss))
	}
	fresh("fresh, keys only", fmt.Sprintf("%d APIKeys", o.keys), s.freshKeys)
	var readies []time.Duration
	for i, f := range s.fresh {
		readies = append(readies, f.ready)
		fresh(fmt.Sprintf("fresh, everything (%d)", i+1), "both", f)
	}
	p("")
	if len(s.fresh) > 0 {
		slices.Sort(readies)
		last := s.fresh[len(s.fresh)-1]
		perKey := perObject(s.freshKeys.mem.live-s.base.live, o.keys)
		perConn := perObject(last.mem.live-s.freshKeys.mem.live, o.connections)
		p("**Per object, fresh servers: %s of heap per APIKey, %s per Connection** (target ≤ 2 KiB each); RSS %s and %s.", perKey, perConn,
			perObject(s.freshKeys.mem.rss-s.base.rss, o.keys), perObject(last.mem.rss-s.freshKeys.mem.rss, o.connections))
		p("The running server, which lived through the fill: %s per key, %s per Connection.",
			perObject(s.afterKeys.live-s.base.live, o.keys), perObject(s.afterConns.live-s.afterKeys.live, o.connections))
		p("")
		p("**Start to ready with everything: median %s** (target ≤ 10 s).", readies[len(readies)/2].Round(time.Millisecond))
		p("")
	}
	if len(s.keysHeapTop) > 0 {
		p("What a fresh server's heap is made of with only the keys cached (`go tool pprof -top -sample_index=inuse_space`):")
		p("each key is two decoded objects in the informers (the APIKey, trimmed, from JSON; its hash Secret, with its labels")
		p("and data maps, from protobuf) and its index entries:")
		p("")
		writeCode(p, s.keysHeapTop)
	}
	if len(s.heapTop) > 0 {
		p("What a fresh server's heap is made of (`go tool pprof -top -sample_index=inuse_space` of its heap profile):")
		p("")
		writeCode(p, s.heapTop)
	}
	if len(s.startTop) > 0 {
		p("Where a fresh server's start-up CPU goes (`go tool pprof -top -cum`, a %s CPU profile from the moment its", startProfile)
		p("metrics port answers; after ready it idles):")
		p("")
		writeCode(p, s.startTop)
	}
	p("### Lists in the largest namespace (%d Connections)", o.largest)
	p("")
	p("Back to back on one keep-alive connection for 3 s; the page is `?limit=100` from a cursor in the middle (reached by")
	p("following `Link` headers).")
	p("")
	p("| request | p50 | p99 |")
	p("|---|---|---|")
	p("| a page of 100 | %s | %s |", ms(s.pageP50), ms(s.pageP99))
	p("| the full list (%s) | %s | %s |", fmtBytes(int64(s.fullBytes)), ms(s.fullP50), ms(s.fullP99))
	p("")
	r.writeOperator(p)
	r.writeLastUsed(p)
	r.writeFootprint(p)
}

func (r *report) writeOperator(p printer) {
	s := r.scale
	n := float64(s.o.keys)
	p("## 5. Operator: %d new APIKeys to Ready", s.o.keys)
	p("")
	p("All created at once (%s), %d per namespace; the operator (`--kube-api-qps=1000 --kube-api-burst=2000`) issues", s.keysCreate.Round(time.Millisecond), s.o.keys/s.o.namespaces)
	p("each: hash Secret, reveal Secret, status. The clock stops when the bench's watch has seen every one Ready with")
	p("its reveal Secret named.")
	p("")
	p("| APIKeys | all Ready after | keys/s |")
	p("|---|---|---|")
	p("| %d | %s | %.0f |", s.o.keys, s.keysReady.Round(time.Millisecond), n/s.keysReady.Seconds())
	p("")
	p("Target: ≤ 3 min for 20,000.")
	p("")
	p("The operator's API calls, from the API server's `apiserver_request_total` before and after, minus the bench's own")
	p("calls (counted by a wrapper around its client); the server only watches. Watches are left out (long-running, counted")
	p("when they end). A status code in brackets marks refused calls.")
	p("")
	p("| call | total | per key |")
	p("|---|---|---|")
	for _, k := range s.opCalls.sorted() {
		p("| `%s` | %.0f | %.2f |", k, s.opCalls[k], s.opCalls[k]/n)
	}
	p("| **all** | %.0f | **%.2f** |", s.opCalls.total(), s.opCalls.total()/n)
	p("")
	if len(s.keyScrapes) > 0 {
		slices.Sort(s.keyScrapes)
		p("**The key metrics at %d keys:** a scrape of the operator's `/metrics` took %s (median of %d; all %s), %s,", s.o.keys,
			ms(s.keyScrapes[len(s.keyScrapes)/2]), len(s.keyScrapes), msList(s.keyScrapes), fmtBytes(int64(s.keyScrapeBytes)))
		p("of which the key collector (per-key series for the first `--key-metrics-limit`, 10,000, and the aggregates) took %s.", ms(time.Duration(s.keyScrapeCollect*float64(time.Second))))
		p("")
	}
	writeCPU(p, "issuing the keys", "key", s.keysCPU, s.o.keys, s.keysReady)
	writeCPU(p, "creating the Connections and giving each its id", "Connection", s.connsCPU, s.o.connections, s.connsReady)
}

// writeCPU shows what a phase cost each process in CPU time, and the rate the phase would
// reach if those processes had the machine's cores to themselves.
func writeCPU(p printer, what, unit string, t cpuTimes, n int, took time.Duration) {
	if len(t) == 0 || n == 0 {
		return
	}
	p("CPU time spent %s (from `/proc/<pid>/stat`), per %s:", what, unit)
	p("")
	p("| kube-apiserver | etcd | operator | server | all four | their share of the %s it took |", took.Round(time.Second))
	p("|---|---|---|---|---|---|")
	per := func(d time.Duration) string {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)/float64(n))
	}
	p("| %s | %s | %s | %s | %s | %.2f of %d cores |", per(t["kube-apiserver"]), per(t["etcd"]), per(t["operator"]), per(t["server"]), per(t.total()),
		t.total().Seconds()/took.Seconds(), runtime.NumCPU())
	p("")
	p("With the %d cores to themselves, these processes would do this at about %.0f %ss/s (cores ÷ CPU per %s); the", runtime.NumCPU(),
		float64(runtime.NumCPU())*float64(n)/t.total().Seconds(), unit, unit)
	p("bench's own client, not counted, also needs some.")
	p("")
}

func (r *report) writeLastUsed(p printer) {
	l := r.scale.lastUsed
	secs := l.elapsed.Seconds()
	p("## 6. `lastUsedAt` writes with %d keys in use", l.keys)
	p("")
	p("Every key authenticates a request about every 10 s (%.0f requests/s, all keys in turn) while the one server replica", float64(l.requests)/secs)
	p("runs with its defaults: a key's `status.lastUsedAt` is written at most once a minute (`--last-used-interval`) and the")
	p("replica writes at most 20 a second (`--last-used-writes-per-second`). Measured over %s after one round of warm-up:", l.elapsed.Round(time.Second))
	p("")
	p("| figure | value |")
	p("|---|---|")
	p("| writes/s (the server's `switchboard_api_last_used_writes_total{result=\"ok\"}`) | %.1f |", l.writes/secs)
	p("| `PATCH apikeys/status`/s seen by the API server | %.1f |", l.patches/secs)
	if l.patches > 0 {
		c := r.scale.lastUsedCPU
		p("| CPU per write (including its watch events to the operator and the server): kube-apiserver, etcd | %.2f ms, %.2f ms |",
			float64(c["kube-apiserver"].Microseconds())/1000/l.patches, float64(c["etcd"].Microseconds())/1000/l.patches)
	}
	p("| keys due but over budget at the last flush (`switchboard_api_last_used_backlog`) | %.0f |", l.backlog)
	p("| oldest `lastUsedAt` of a key waiting (`switchboard_api_last_used_staleness_seconds`) | %.0f s |", l.staleness)
	p("")
	p("Without the budget the replica would write every key once a minute: %.0f writes/s, and each replica as many", float64(l.keys)/60)
	p("again. With it, each replica writes at most 20/s whatever the number of keys, and a key's `lastUsedAt` is at most")
	p("about keys ÷ 20 s old (%.0f s here) instead of a minute: the stalest are written first. The staleness above grows", float64(l.keys)/20)
	p("during the first round and levels off there; `TestLastUsedBudgetAt20000ActiveKeys` runs the same schedule on an")
	p("injected clock for 2,500 s.")
	p("")
}

func (r *report) writeFootprint(p printer) {
	s := r.scale
	p("## 7. Cluster footprint at this size")
	p("")
	p("For [scaling.md](scaling.md). Objects counted with a LIST of one item (`remainingItemCount`); etcd's database size")
	p("from the API server's `apiserver_storage_size_bytes` (the file, including history not yet compacted); RSS from `/proc`.")
	p("")
	p("| what | value |")
	p("|---|---|")
	for _, kind := range []string{"Connections", "APIKeys", "Secrets", "Events", "Namespaces"} {
		p("| %s stored | %.0f |", kind, s.objects[kind])
	}
	objects := int(s.objects["Connections"] + s.objects["APIKeys"] + s.objects["Secrets"] + s.objects["Events"])
	p("| etcd database, before → after | %s → %s (%s per object stored) |", fmtBytes(int64(s.storageBytes0)), fmtBytes(int64(s.storageBytes)),
		perObject(int64(s.storageBytes-s.storageBytes0), objects))
	p("| kube-apiserver RSS, before → after | %s → %s (%s per object) |", fmtBytes(s.apiserverRSS0), fmtBytes(s.apiserverRSS), perObject(s.apiserverRSS-s.apiserverRSS0, objects))
	p("| etcd RSS, before → after | %s → %s (%s per object) |", fmtBytes(s.etcdRSS0), fmtBytes(s.etcdRSS), perObject(s.etcdRSS-s.etcdRSS0, objects))
	p("| operator live heap (at its last GC) / RSS | %s / %s |", fmtBytes(s.operatorLive), fmtBytes(s.operatorRSS))
	p("")
	p("The server's figures are in section 4 (%s live heap, %s RSS with everything cached).", fmtBytes(s.afterConns.live), fmtBytes(s.afterConns.rss))
	p("")
}

// msList writes durations as milliseconds, comma-separated.
func msList(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
	}
	return strings.Join(out, ", ") + " ms"
}
