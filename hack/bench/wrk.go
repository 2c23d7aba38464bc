package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	// wrkCPU is the CPU time wrk itself used.
	wrkCPU time.Duration
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
	cmd := exec.CommandContext(ctx, "wrk", args...) // #nosec G204 -- the bench runs wrk on its own URLs.
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	res, err := parseWrk(string(out))
	res.wrkCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return res, err
}

// bearerLine is key's Authorization header as wrk's -H takes it.
func bearerLine(key string) string { return "Authorization: Bearer " + key }

// wrkSide is one target of wrkRounds, named for the progress line, and where its requests per
// second go.
type wrkSide struct {
	name, url, header string
	into              *[]float64
}

// wrkRounds warms every side up for 2 s, then runs wrk on each for o.duration, o.rounds times,
// rotating who goes first so that drift favours none, and prints each round's figures. A run
// with a failed or unexpected response fails them.
func wrkRounds(ctx context.Context, part string, o options, sides []wrkSide) error {
	for _, s := range sides {
		if _, err := runWrk(ctx, s.url, s.header, o.conns, 2*time.Second); err != nil {
			return err
		}
	}
	for round := range o.rounds {
		for i := range sides {
			s := sides[(i+round)%len(sides)]
			w, err := runWrk(ctx, s.url, s.header, o.conns, o.duration)
			if err != nil {
				return err
			}
			if w.bad > 0 {
				return fmt.Errorf("wrk on %s (%s): %d failed or unexpected responses", s.name, s.url, w.bad)
			}
			*s.into = append(*s.into, w.rps)
		}
		figures := make([]string, len(sides))
		for i, s := range sides {
			figures[i] = fmt.Sprintf("%s %.0f/s", s.name, (*s.into)[round])
		}
		fmt.Printf("bench: %s round %d: %s\n", part, round+1, strings.Join(figures, ", "))
	}
	return nil
}

// loadRun is one wrk run against one server, with what the machine's CPUs did meanwhile.
type loadRun struct {
	wrkResult
	// serverCPU is the CPU time the server process used.
	serverCPU time.Duration
	// othersCPU is the CPU time every other process of the machine used (the bench's own
	// included, which is idle while wrk runs): how much the machine was shared.
	othersCPU time.Duration
	elapsed   time.Duration
}

// usPerRequest is the server's CPU per answered request, in microseconds.
func (l loadRun) usPerRequest() float64 {
	if l.requests == 0 {
		return 0
	}
	return float64(l.serverCPU.Microseconds()) / float64(l.requests)
}

// othersCores is how many cores other processes kept busy on average.
func (l loadRun) othersCores() float64 {
	if l.elapsed <= 0 {
		return 0
	}
	return l.othersCPU.Seconds() / l.elapsed.Seconds()
}

// measuredRun runs wrk against the server whose pid is given and accounts for the CPU.
func measuredRun(ctx context.Context, pid int, url, header string, conns int, d time.Duration) (loadRun, error) {
	busy0, err := machineBusy()
	if err != nil {
		return loadRun{}, err
	}
	srv0, err := pidCPU(pid)
	if err != nil {
		return loadRun{}, err
	}
	start := time.Now()
	res, err := runWrk(ctx, url, header, conns, d)
	if err != nil {
		return loadRun{}, err
	}
	run := loadRun{wrkResult: res, elapsed: time.Since(start)}
	srv1, err := pidCPU(pid)
	if err != nil {
		return loadRun{}, err
	}
	busy1, err := machineBusy()
	if err != nil {
		return loadRun{}, err
	}
	run.serverCPU = srv1 - srv0
	run.othersCPU = max(0, busy1-busy0-run.serverCPU-res.wrkCPU)
	return run, nil
}

// machineBusy is the CPU time all cores have spent on anything but idling, from /proc/stat.
func machineBusy() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat: %q", line)
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is already in user
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	return time.Duration(busy) * 10 * time.Millisecond, nil
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
	raw, err := fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, secs))
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

// pprofTop keeps the table of `go tool pprof -top`: its header line and the entries.
func pprofTop(out string) []string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "flat%") })
	if i < 0 {
		return lines
	}
	return lines[i:]
}
