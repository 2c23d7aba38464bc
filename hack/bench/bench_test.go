package main

import (
	"bufio"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCallKind(t *testing.T) {
	tests := []struct {
		method, path string
		watch        bool
		want         string
	}{
		{"POST", "/apis/switchboard.dev/v1alpha1/namespaces/a/apikeys", false, "POST apikeys"},
		{"GET", "/apis/switchboard.dev/v1alpha1/namespaces/a/apikeys/k", false, "GET apikeys"},
		{"GET", "/apis/switchboard.dev/v1alpha1/apikeys", false, "LIST apikeys"},
		{"GET", "/apis/switchboard.dev/v1alpha1/apikeys", true, "WATCH apikeys"},
		{"PATCH", "/apis/switchboard.dev/v1alpha1/namespaces/a/apikeys/k/status", false, "PATCH apikeys/status"},
		{"DELETE", "/api/v1/namespaces/a/secrets/s", false, "DELETE secrets"},
		{"POST", "/api/v1/namespaces", false, "POST namespaces"},
		{"GET", "/api/v1/namespaces/a", false, "GET namespaces"},
		{"GET", "/metrics", false, "GET /metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if got := callKind(tt.method, tt.path, tt.watch); got != tt.want {
				t.Errorf("callKind = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseWrk(t *testing.T) {
	const clean = `Running 5s test @ http://127.0.0.1:8080/v1/connections
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   780.12us  120.45us   5.12ms   90.12%
    Req/Sec    41.02k     1.20k   43.10k    72.00%
  204123 requests in 5.00s, 380.12MB read
Requests/sec:  40824.60
Transfer/sec:     76.02MB
`
	const bad = `Running 5s test @ http://127.0.0.1:8080/v1/connections
  1 threads and 32 connections
  1000 requests in 5.00s, 1.12MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:    200.00
`
	tests := []struct {
		name    string
		out     string
		want    wrkResult
		wantErr bool
	}{
		{"clean run", clean, wrkResult{rps: 40824.60, requests: 204123}, false},
		{"errors and non-2xx count as bad", bad, wrkResult{rps: 200, requests: 1000, bad: 10}, false},
		{"no summary", "unable to connect to 127.0.0.1:1 Connection refused\n", wrkResult{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseWrk(tt.out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseWrk = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		name                      string
		total, namespaces, larges int
		want                      []int
	}{
		{"largest first, the rest even", 100, 4, 40, []int{40, 20, 20, 20}},
		{"a remainder goes to the first of the others", 101, 4, 40, []int{40, 21, 20, 20}},
		{"one namespace takes everything", 50, 1, 10, []int{50}},
		{"largest beyond the total", 10, 3, 20, []int{10, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spread(tt.total, tt.namespaces, tt.larges)
			if !slices.Equal(got, tt.want) {
				t.Errorf("spread = %v, want %v", got, tt.want)
			}
			sum := 0
			for _, n := range got {
				sum += n
			}
			if sum != tt.total {
				t.Errorf("spread sums to %d, want %d", sum, tt.total)
			}
		})
	}
}

func TestCallCountsSub(t *testing.T) {
	after := callCounts{"POST secrets": 10, "PATCH apikeys": 4, "GET apikeys": 1}
	before := callCounts{"POST secrets": 2, "GET apikeys": 1}
	got := after.sub(before)
	want := callCounts{"POST secrets": 8, "PATCH apikeys": 4}
	if len(got) != len(want) || got["POST secrets"] != 8 || got["PATCH apikeys"] != 4 {
		t.Errorf("sub = %v, want %v", got, want)
	}
	if s := got.sorted(); !slices.Equal(s, []string{"POST secrets", "PATCH apikeys"}) {
		t.Errorf("sorted = %v", s)
	}
}

func TestParseCum(t *testing.T) {
	const out = `File: switchboard
Type: cpu
Duration: 8s, Total samples = 7.60s (94.99%)
Showing nodes accounting for 5.66s, 74.47% of 7.60s total
      flat  flat%   sum%        cum   cum%
     0.02s  0.26%  0.26%      6.55s 86.18%  net/http.(*conn).serve
     3.29s 43.29% 43.82%      3.29s 43.29%  internal/runtime/syscall/linux.Syscall6
         0     0% 44.00%     40ms  0.53%  time.Now (inline)
`
	total, cum := parseCum(out)
	if total != 7600*time.Millisecond {
		t.Errorf("total = %v, want 7.6s", total)
	}
	for fn, want := range map[string]float64{"net/http.(*conn).serve": 6.55, "internal/runtime/syscall/linux.Syscall6": 3.29, "time.Now": 0.04} {
		if got := cum[fn]; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("cum[%s] = %v, want %v", fn, got, want)
		}
	}
	p := cpuProfile{requests: 1e6, cum: cum}
	if got := p.perRequest("net/http.(*conn).serve"); got < 6.549 || got > 6.551 {
		t.Errorf("perRequest = %v µs, want 6.55", got)
	}
}

func TestLoadRunFigures(t *testing.T) {
	l := loadRun{wrkResult: wrkResult{requests: 400000}, serverCPU: 8 * time.Second, othersCPU: 5 * time.Second, elapsed: 10 * time.Second}
	if got := l.usPerRequest(); got != 20 {
		t.Errorf("usPerRequest = %v, want 20", got)
	}
	if got := l.othersCores(); got != 0.5 {
		t.Errorf("othersCores = %v, want 0.5", got)
	}
	if busy, err := machineBusy(); err != nil || busy <= 0 {
		t.Errorf("machineBusy = %v, %v; want a positive CPU time", busy, err)
	}
}

// TestParsePrior: a report is cut into its header, the sections of each step (subsections
// included) and those measured apart; every other section is dropped, as each run writes it anew.
func TestParsePrior(t *testing.T) {
	stepOf := map[int]string{1: "throughput", 2: "throughput", 3: "revocation"}
	tests := []struct {
		name   string
		report string
		want   priorReport
	}{
		{
			name: "every kind of section",
			report: "# switchboard benchmarks\n\nCommit abc.\n\n## 1. Throughput\n\nold\n\n### Where the CPU goes\n\nrows\n\n## 2. Latency\n\nlat\n\n" +
				"## 3. Revocation latency\n\nrev\n\n## 12. Unknown\n\nlost\n\n## Memory under a hostile tenant " + apartMarker + "\n\nkept\n\n## Rerunning\n\n- how\n",
			want: priorReport{
				header: "# switchboard benchmarks\n\nCommit abc.\n\n",
				steps: map[string]string{
					"throughput": "## 1. Throughput\n\nold\n\n### Where the CPU goes\n\nrows\n\n## 2. Latency\n\nlat\n\n",
					"revocation": "## 3. Revocation latency\n\nrev\n\n",
				},
				apart: "## Memory under a hostile tenant " + apartMarker + "\n\nkept\n\n",
			},
		},
		{"no report", "", priorReport{steps: map[string]string{}}},
		{"a header alone", "# switchboard benchmarks\n\nCommit abc.\n", priorReport{header: "# switchboard benchmarks\n\nCommit abc.\n", steps: map[string]string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parsePrior(tt.report, stepOf)
			if got.header != tt.want.header || got.apart != tt.want.apart || !maps.Equal(got.steps, tt.want.steps) {
				t.Errorf("parsePrior =\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

// TestWriteSplices: a run of some parts into an existing report replaces only their sections,
// marked, and keeps the header, the other parts' sections and those measured apart; into a new
// file, or when every part ran, the report is the run's alone.
func TestWriteSplices(t *testing.T) {
	const old = "# switchboard benchmarks\n\nCommit old, the full run.\n\n## 1. Throughput: old\n\nold figures\n\n### Where the CPU goes\n\nold rows\n\n" +
		"## 2. Latency under open-loop load\n\nold latency\n\n## 3. Revocation latency\n\nold revocation\n\n## 8. Hot path\n\nold bench lines\n\n" +
		"## Memory under a hostile tenant " + apartMarker + "\n\nkept figures\n\n## Rerunning\n\n- old how\n"
	fresh := func(only ...string) *report {
		r := newReport()
		r.only = only
		r.ran["revocation"] = true
		r.revocations = []time.Duration{time.Millisecond}
		return r
	}
	tests := []struct {
		name      string
		prior     string
		only      []string
		want      []string // in this order
		wantNot   []string
		rerunMark int // sections marked as a later run's
	}{
		{"some parts into a report", old, []string{"revocation"},
			[]string{"Commit old, the full run.", "## 1. Throughput: old", "old rows", "old latency", "## 3. Revocation latency", "## 8. Hot path", "kept figures", "## Rerunning"},
			[]string{"old revocation", "old how"}, 1},
		{"some parts into a new file", "", []string{"revocation"},
			[]string{"# switchboard benchmarks", "Written by", "## 3. Revocation latency", "## Rerunning"},
			[]string{"## 1.", "## 8."}, 0},
		{"every part", old, nil,
			[]string{"# switchboard benchmarks", "Written by", "## 3. Revocation latency", "kept figures", "## Rerunning"},
			[]string{"Commit old", "old figures", "old revocation", "old bench lines"}, 0},
		{"not a report of the bench", "notes\n\n## 1. Mine\n", []string{"revocation"},
			[]string{"# switchboard benchmarks", "Written by", "## 3. Revocation latency"},
			[]string{"notes", "Mine"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "benchmarks.md")
			if tt.prior != "" {
				if err := os.WriteFile(path, []byte(tt.prior), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := fresh(tt.only...).write(path); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := string(raw)
			at := 0
			for _, w := range tt.want {
				i := strings.Index(got[at:], w)
				if i < 0 {
					t.Fatalf("%q missing, or out of order, in\n%s", w, got)
				}
				at += i + len(w)
			}
			for _, w := range tt.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("%q still in\n%s", w, got)
				}
			}
			if n := strings.Count(got, "from a later run of only some parts"); n != tt.rerunMark {
				t.Errorf("%d sections marked as a later run's, want %d:\n%s", n, tt.rerunMark, got)
			}
		})
	}
}

func TestMarkRerun(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"under each section, not its subsections", "## 1. A\n\na\n\n### Sub\n\nb\n\n## 2. B\n\nc\n", "## 1. A\n\nN\n\na\n\n### Sub\n\nb\n\n## 2. B\n\nN\n\nc\n"},
		{"no section", "text\n", "text\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := markRerun(tt.text, "N"); got != tt.want {
				t.Errorf("markRerun = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRatiosTo(t *testing.T) {
	tests := []struct {
		name       string
		auth, base []float64
		want       ratios
	}{
		{"one round", []float64{90}, []float64{100}, ratios{0.9, []float64{0.9}}},
		{"medians, not per-round ratios", []float64{80, 95, 90}, []float64{100, 100, 50}, ratios{0.9, []float64{0.8, 0.95, 1.8}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ratiosTo(tt.auth, tt.base)
			if math.Abs(got.ofMedians-tt.want.ofMedians) > 1e-9 || len(got.rounds) != len(tt.want.rounds) {
				t.Fatalf("ratiosTo = %+v, want %+v", got, tt.want)
			}
			for i := range got.rounds {
				if math.Abs(got.rounds[i]-tt.want.rounds[i]) > 1e-9 {
					t.Errorf("round %d: %v, want %v", i, got.rounds[i], tt.want.rounds[i])
				}
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	tests := []struct {
		name                  string
		ratio, target, before float64
		want                  string
	}{
		{"met and higher", 0.971, 0.95, 0.96, "target ≥ 0.95: met; 0.96 at 98e4b76: higher"},
		{"as printed: 0.955 is 0.96, the same", 0.955, 0.95, 0.96, "target ≥ 0.95: met; 0.96 at 98e4b76: the same"},
		{"as printed: 0.8951 is 0.90, met", 0.8951, 0.90, 0.89, "target ≥ 0.90: met; 0.89 at 98e4b76: higher"},
		{"not met and lower", 0.884, 0.90, 0.89, "target ≥ 0.90: **not met**; 0.89 at 98e4b76: **lower**"},
		{"no figure before", 0.93, 0.95, 0, "target ≥ 0.95: **not met**; no figure before"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := verdict(tt.ratio, tt.target, tt.before, "98e4b76"); got != tt.want {
				t.Errorf("verdict = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCommandCalls: the credits part counts every command Redis ran but the bench's own.
func TestCommandCalls(t *testing.T) {
	stats := "# Commandstats\r\ncmdstat_evalsha:calls=10000,usec=52000,usec_per_call=5.20,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=3,usec=40,usec_per_call=13.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=5,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_script|load:calls=1,usec=30,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n"
	got := commandCalls(stats)
	if want := map[string]int64{"evalsha": 10000, "script|load": 1}; !maps.Equal(got, want) {
		t.Errorf("commandCalls = %v, want %v", got, want)
	}
}

// TestSkipCommand: the counting proxy counts whole commands, whatever their arguments hold.
func TestSkipCommand(t *testing.T) {
	stream := "*3\r\n$7\r\nEVALSHA\r\n$5\r\n*1\r\n$\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n"
	r := bufio.NewReader(strings.NewReader(stream))
	n := 0
	for skipCommand(r) == nil {
		n++
	}
	if n != 2 {
		t.Errorf("counted %d commands, want 2", n)
	}
}

// TestWriteBinding: each bound kind's added p99 is the difference of its p99 and the bearer
// key's, judged against its target as the issue words it.
func TestWriteBinding(t *testing.T) {
	constant := func(d time.Duration) []time.Duration { return slices.Repeat([]time.Duration{d}, 100) }
	r := newReport()
	r.binding = &bindingResult{rounds: 1, checks: map[string]int{}, latency: map[string][]time.Duration{
		bindBearer:     constant(time.Microsecond),
		bindCached:     constant(61 * time.Microsecond),   // adds 60 µs: over 50 µs
		bindTokenFirst: constant(201 * time.Microsecond),  // adds 200 µs: within 1 ms
		bindDPoPFirst:  constant(1001 * time.Microsecond), // adds exactly 1 ms: within
	}}
	var b strings.Builder
	r.writeBinding(func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...) + "\n") })
	for _, want := range []string{
		"| " + bindBearer + " | 100 | 1.00 µs | 1.00 µs | 1.00 µs | 0.00 µs | (baseline) |",
		"| " + bindCached + " | 100 | 61.00 µs | 61.00 µs | 61.00 µs | 60.00 µs | ≤ 50 µs: **not met** |",
		"| " + bindTokenFirst + " | 100 | 201.00 µs | 201.00 µs | 201.00 µs | 200.00 µs | ≤ 1 ms: met |",
		"| " + bindDPoPFirst + " | 100 | 1001.00 µs | 1001.00 µs | 1001.00 µs | 1000.00 µs | ≤ 1 ms: met |",
		"Section 1 gives them as measured since.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the section lacks %q:\n%s", want, b.String())
		}
	}

	// With the throughput part in the same run, its ratios against those before: 95,000 of
	// 100,000 requests is 0.95, lower than 0.96; the same CPU per request is 1.00, not lower.
	run := func(requests int) loadRun {
		return loadRun{wrkResult: wrkResult{rps: float64(requests) / 10, requests: requests}, serverCPU: time.Second, elapsed: 10 * time.Second}
	}
	r.ran["throughput"], r.rounds, r.duration = true, 1, 10*time.Second
	r.unlimitedRuns, r.authRuns = []loadRun{run(100000)}, []loadRun{run(95000)}
	r.authRuns[0].serverCPU = 950 * time.Millisecond
	b.Reset()
	r.writeBinding(func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...) + "\n") })
	for _, want := range []string{"measured **0.95** (**lower**;", "per request **1.00** (not lower)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the section lacks %q:\n%s", want, b.String())
		}
	}
}
