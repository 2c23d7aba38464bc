package main

import (
	"os"
	"path/filepath"
	"slices"
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

// TestKeptSections: a rerun keeps the report's sections measured apart, and only those.
func TestKeptSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	report := "# switchboard benchmarks\n\n## 1. Throughput\n\nold figures\n\n## Memory under a hostile tenant " + apartMarker + "\n\nkept figures\n\n## Rerunning\n\n- how\n"
	if err := os.WriteFile(path, []byte(report), 0o600); err != nil {
		t.Fatal(err)
	}
	want := "## Memory under a hostile tenant " + apartMarker + "\n\nkept figures\n\n"
	if got := keptSections(path); got != want {
		t.Errorf("kept %q, want %q", got, want)
	}
	if got := keptSections(filepath.Join(t.TempDir(), "none.md")); got != "" {
		t.Errorf("without a report, kept %q", got)
	}
}
