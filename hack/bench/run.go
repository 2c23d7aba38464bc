package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// rig is the system under measurement.
type rig struct {
	env       *testenv.Env
	dir       string
	bin       string
	kenv      []string // the environment that points a process at the control plane
	apiURL    string
	authzAddr string
	// operatorMetrics is the operator's plain-HTTP metrics address (the key metrics' scrape).
	operatorMetrics string
	metricsAddr     string // the server's metrics and pprof
	server          *proc
	operator        *proc
	report          *report
}

// step is one part of the bench; its name selects it with -only, and sections are the numbers
// of the report's sections it writes (a run of some parts replaces only theirs).
type step struct {
	name     string
	fn       func(context.Context, options) error
	sections []int
}

// steps lists the bench's parts in the order they run.
func steps(r *rig) []step {
	// The parts that compare switchboard with a bare server run before the scale part fills
	// the server's heap with 100,000 Connections (the bare servers hold nothing, and a big heap
	// makes every allocation cost more GC): each comparison then measures the protocol's work.
	return []step{
		{"throughput", r.throughput, []int{1, 2}}, // throughput ratio and latency
		{"revocation", r.revocation, []int{3}},
		{"policy", r.policy, []int{9}},            // the rate limiter's cost (policy.go)
		{"authz", r.authz, []int{10}},             // Envoy ext_authz over gRPC (authz.go)
		{"forwardauth", r.forwardAuth, []int{11}}, // forward-auth through Caddy (forwardauth.go)
		{"credits", r.credits, []int{12}},         // credits and permissions in a check (credits.go)
		{"binding", r.binding, []int{13}},         // workload binding's proofs in a check (binding.go)
		{"scale", r.scale, []int{4, 5, 6, 7}},     // memory, start-up, operator throughput, lastUsedAt, footprint
		{"hotpath", r.hotPath, []int{8}},
	}
}

// sectionSteps maps each numbered section of the report to the step that writes it.
func sectionSteps() map[int]string {
	m := map[int]string{}
	for _, s := range steps(&rig{}) {
		for _, n := range s.sections {
			m[n] = s.name
		}
	}
	return m
}

// stepNames lists the names -only accepts.
func stepNames() []string {
	var names []string
	for _, s := range steps(&rig{}) {
		names = append(names, s.name)
	}
	return names
}

func run(ctx context.Context, o options) error {
	started := time.Now()
	dir, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return err
	}
	fmt.Printf("bench: logs in %s\n", dir)
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(env.Config, env.Config.Host, "", kubeconfig); err != nil {
		return err
	}
	if err := env.EnsureNamespace(ctx, "switchboard-system"); err != nil {
		return err
	}
	kenv := []string{"KUBECONFIG=" + kubeconfig}
	r := &rig{env: env, dir: dir, bin: o.bin, kenv: kenv, report: newReport()}
	r.report.only = o.only
	r.report.loadStart = loadAverage()

	addrs, err := freeAddrs(3)
	if err != nil {
		return err
	}
	r.operatorMetrics, r.authzAddr, r.metricsAddr = addrs[0], addrs[1], addrs[2]
	r.operator, err = startProc("operator", dir, append(kenv, "GODEBUG=gctrace=1"), o.bin, "operator", "--leader-elect=false",
		"--metrics-bind-address="+r.operatorMetrics, "--metrics-secure=false", "--health-probe-bind-address=", "--kube-api-qps=1000", "--kube-api-burst=2000")
	if err != nil {
		return err
	}
	defer r.operator.stop()
	r.server, r.apiURL, err = r.startServer(ctx, "server", "--metrics-bind-address="+r.metricsAddr, "--metrics-secure=false", "--pprof", "--authz-grpc-listen="+r.authzAddr)
	if err != nil {
		return err
	}
	defer r.server.stop()

	for _, s := range steps(r) {
		if len(o.only) > 0 && !slices.Contains(o.only, s.name) {
			continue
		}
		t := time.Now()
		fmt.Printf("bench: %s…\n", s.name)
		// A part that fails is named in the report, and the others still run: a long run is
		// not lost to one part.
		if err := s.fn(ctx, o); err != nil {
			fmt.Printf("bench: %s failed: %v\n", s.name, err)
			r.report.failed = append(r.report.failed, fmt.Sprintf("%s: %v", s.name, err))
			continue
		}
		r.report.ran[s.name] = true
		fmt.Printf("bench: %s done in %s\n", s.name, time.Since(t).Round(time.Second))
	}
	r.report.total = time.Since(started)
	r.report.cores = runtime.NumCPU()
	if err := r.report.write(o.out); err != nil {
		return err
	}
	fmt.Printf("bench: wrote %s in %s\n", o.out, time.Since(started).Round(time.Second))
	if len(r.report.failed) > 0 {
		return fmt.Errorf("%d part(s) failed (logs in %s): %s", len(r.report.failed), dir, strings.Join(r.report.failed, "; "))
	}
	return nil
}
