package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// freshServer starts another server against the cluster, times it from start to ready,
// measures its memory and the API server's CPU meanwhile (from meter), keeps its heap profile,
// and, when top is set, the profile's top entries.
//
// With cpuTop set, it also profiles the server's CPU from when its metrics port answers, for
// startProfile (ready or not: after ready it idles), and keeps that profile's top entries.
func (r *rig) freshServer(ctx context.Context, name string, meter *cpuMeter, top, cpuTop *[]string) (freshStart, error) {
	addrs, err := freeAddrs(3)
	if err != nil {
		return freshStart{}, err
	}
	cpu0 := meter.read()
	start := time.Now()
	p, err := startProc("server-fresh-"+name, r.dir, r.kenv, r.bin, "server", "--listen="+addrs[0],
		"--metrics-bind-address="+addrs[1], "--metrics-secure=false", "--pprof", "--health-probe-bind-address="+addrs[2], "--shutdown-delay=0s")
	if err != nil {
		return freshStart{}, err
	}
	defer p.stop()
	profiled := make(chan error, 1)
	if cpuTop != nil {
		go func() { profiled <- r.startupProfile(ctx, name, addrs[1], cpuTop) }()
	} else {
		profiled <- nil
	}
	if err := pollReady(ctx, "http://"+addrs[2]+"/readyz", 5*time.Minute); err != nil {
		return freshStart{}, err
	}
	f := freshStart{ready: time.Since(start)}
	if f.serverCPU, err = pidCPU(p.Pid()); err != nil {
		return freshStart{}, err
	}
	f.apiserverCPU = meter.read().since(cpu0)["kube-apiserver"]
	if err := <-profiled; err != nil { // buffered: on an earlier return the profiler still ends
		return freshStart{}, err
	}
	if f.mem, err = r.serverMem(ctx, p, addrs[1]); err != nil {
		return freshStart{}, err
	}
	raw, err := fetch(ctx, "http://"+addrs[1]+"/debug/pprof/heap")
	if err != nil {
		return freshStart{}, err
	}
	file := filepath.Join(r.dir, "server-heap-"+name+".pprof")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return freshStart{}, err
	}
	if top != nil {
		out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=14", "-sample_index=inuse_space", file).Output() // #nosec G204 -- the bench profiles its own server.
		if err != nil {
			return freshStart{}, fmt.Errorf("go tool pprof: %w", err)
		}
		*top = pprofTop(string(out))
	}
	return f, nil
}

// startProfile is how long a start-up CPU profile runs.
const startProfile = 30 * time.Second

// startupProfile waits for a starting server's metrics port and profiles its CPU for
// startProfile.
func (r *rig) startupProfile(ctx context.Context, name, metricsAddr string, top *[]string) error {
	if err := pollReady(ctx, "http://"+metricsAddr+"/metrics", time.Minute); err != nil {
		return err
	}
	raw, err := fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", metricsAddr, int(startProfile.Seconds())))
	if err != nil {
		return err
	}
	file := filepath.Join(r.dir, "server-start-cpu-"+name+".pprof")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=30", file).Output() // #nosec G204 -- the bench profiles its own server.
	if err != nil {
		return fmt.Errorf("go tool pprof: %w", err)
	}
	*top = pprofTop(string(out))
	return nil
}

// serverMem forces a GC in a server started with --pprof and returns its live heap (the heap
// allocated right after that GC, from the profile's runtime.MemStats) and its RSS.
func (r *rig) serverMem(ctx context.Context, p *proc, metricsAddr string) (memPoint, error) {
	raw, err := fetch(ctx, "http://"+metricsAddr+"/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return memPoint{}, err
	}
	i := bytes.Index(raw, []byte("\n# HeapAlloc = "))
	if i < 0 {
		return memPoint{}, errors.New("the server's heap profile has no HeapAlloc")
	}
	var live int64
	if _, err := fmt.Sscanf(string(raw[i+1:]), "# HeapAlloc = %d", &live); err != nil {
		return memPoint{}, fmt.Errorf("reading HeapAlloc: %w", err)
	}
	rss, err := p.rss()
	return memPoint{live: live, rss: rss}, err
}

// pollReady polls a readiness URL every 25 ms until it answers 200.
func pollReady(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("%s was not ready after %s", url, timeout)
}
