package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run reported.
type wrkResult struct {
	rps      float64
	requests int
	// bad counts non-2xx/3xx responses and socket errors: any makes the run void.
	bad int
}

var (
	wrkRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkRequests = regexp.MustCompile(`(?m)^\s+(\d+) requests in `)
	wrkNon2xx   = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses: (\d+)`)
	wrkSocket   = regexp.MustCompile(`(?m)^\s+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// checkWrk fails early, with the fix, when wrk is missing.
func checkWrk() error {
	if _, err := exec.LookPath("wrk"); err != nil {
		return errors.New("wrk is not installed; the throughput part needs it: apt-get install wrk")
	}
	return nil
}

// runWrk runs wrk with one thread and conns keep-alive connections against url for d.
func runWrk(ctx context.Context, url string, header string, conns int, d time.Duration) (wrkResult, error) {
	args := []string{"-t1", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", int(d.Seconds())), "--timeout", "5s"}
	if header != "" {
		args = append(args, "-H", header)
	}
	args = append(args, url)
	out, err := exec.CommandContext(ctx, "wrk", args...).CombinedOutput() // #nosec G204 -- the bench runs wrk on its own URLs.
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return parseWrk(string(out))
}

func parseWrk(out string) (wrkResult, error) {
	m := wrkRPS.FindStringSubmatch(out)
	n := wrkRequests.FindStringSubmatch(out)
	if m == nil || n == nil {
		return wrkResult{}, fmt.Errorf("unexpected wrk output:\n%s", out)
	}
	var r wrkResult
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	r.requests, _ = strconv.Atoi(n[1])
	if b := wrkNon2xx.FindStringSubmatch(out); b != nil {
		v, _ := strconv.Atoi(b[1])
		r.bad += v
	}
	if s := wrkSocket.FindStringSubmatch(out); s != nil {
		for _, f := range s[1:] {
			v, _ := strconv.Atoi(f)
			r.bad += v
		}
	}
	return r, nil
}

// cpuProfile is a CPU profile taken under wrk load, per request.
type cpuProfile struct {
	requests float64            // requests answered while it ran
	total    time.Duration      // CPU time it sampled
	cum      map[string]float64 // seconds by function, including callees
	top      []string           // `go tool pprof -top` (flat)
}

// perRequest is a function's CPU time per request, in microseconds.
func (p cpuProfile) perRequest(fn string) float64 {
	if p.requests == 0 {
		return 0
	}
	return p.cum[fn] / p.requests * 1e6
}

// profileUnderLoad runs wrk against url for d while taking a CPU profile of the process whose
// pprof is at pprofAddr.
func (r *rig) profileUnderLoad(ctx context.Context, name, url, header, pprofAddr string, conns int, d time.Duration) (cpuProfile, error) {
	type result struct {
		res wrkResult
		err error
	}
	load := make(chan result, 1)
	go func() {
		res, err := runWrk(ctx, url, header, conns, d)
		load <- result{res, err}
	}()
	// Start a second in, stop a second before the end: the profile sees only steady load.
	time.Sleep(time.Second)
	secs := int(d.Seconds()) - 2
	raw, err := r.fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, secs))
	w := <-load
	if w.err != nil {
		return cpuProfile{}, w.err
	}
	if err != nil {
		return cpuProfile{}, err
	}
	file := filepath.Join(r.dir, name+"-cpu.pprof")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return cpuProfile{}, err
	}
	prof := cpuProfile{requests: w.res.rps * float64(secs), cum: map[string]float64{}}
	flat, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=20", file).Output() // #nosec G204 -- the bench profiles its own processes.
	if err != nil {
		return cpuProfile{}, fmt.Errorf("go tool pprof: %w", err)
	}
	prof.top = pprofTop(string(flat))
	cum, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=100000", "-nodefraction=0", file).Output() // #nosec G204 -- as above.
	if err != nil {
		return cpuProfile{}, fmt.Errorf("go tool pprof: %w", err)
	}
	prof.total, prof.cum = parseCum(string(cum))
	return prof, nil
}

var (
	pprofTotal = regexp.MustCompile(`Total samples = ([0-9.]+)(ms|s)`)
	pprofLine  = regexp.MustCompile(`^\s*[0-9.]+(?:ms|s|us)?\s+[0-9.]+%\s+[0-9.]+%\s+([0-9.]+)(ms|s|us)?\s+[0-9.]+%\s+(.+)$`)
)

// parseCum reads `go tool pprof -top -cum`: the total, and each function's cumulative seconds.
func parseCum(out string) (time.Duration, map[string]float64) {
	cum := map[string]float64{}
	var total time.Duration
	if m := pprofTotal.FindStringSubmatch(out); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		total = time.Duration(v * unitSeconds(m[2]) * float64(time.Second))
	}
	for _, line := range strings.Split(out, "\n") {
		m := pprofLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		cum[strings.TrimSpace(strings.TrimSuffix(m[3], " (inline)"))] += v * unitSeconds(m[2])
	}
	return total, cum
}

func unitSeconds(unit string) float64 {
	switch unit {
	case "ms":
		return 1e-3
	case "us":
		return 1e-6
	}
	return 1
}
