// Command bench measures switchboard on this machine and writes docs/benchmarks.md: /v1
// throughput against a bare net/http handler serving the same bytes, latency at half the
// maximum rate, revocation latency, the server's memory per cached Connection, page latency
// in a large namespace, operator throughput, the hot path's Go benchmarks, the rate limiter's
// cost, Envoy ext_authz over gRPC against an always-allow server, what forward-auth adds
// behind Caddy, and what credits and permissions, and workload binding's proofs, add to a check.
//
// It starts a real control plane (internal/testenv), runs bin/switchboard operator and
// bin/switchboard server as separate processes, and drives them from this process with
// hack/bench/loadgen, everything on loopback. `make bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type options struct {
	out        string
	bin        string
	duration   time.Duration
	rounds     int
	conns      int
	scaleOpts  scaleOptions
	revokeN    int
	bareListen string
	bareBody   string
	barePprof  string
	bareHeader string
	// bareNoLimits serves the bare handler with net/http's defaults: no ReadHeaderTimeout.
	bareNoLimits bool
	// bareAuthzListen and bareAuthzResponse make this process the always-allow ext_authz server.
	bareAuthzListen   string
	bareAuthzResponse string
	// caddy is the Caddy binary of the forwardauth part.
	caddy string
	only  []string
}

func main() {
	var o options
	var only string
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "report to write")
	flag.StringVar(&o.bin, "bin", "bin/switchboard", "the switchboard binary")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each throughput run")
	flag.IntVar(&o.rounds, "rounds", 5, "throughput runs of each handler, interleaved; the median is reported")
	flag.IntVar(&o.conns, "connections", 32, "keep-alive connections of wrk")
	flag.IntVar(&o.scaleOpts.connections, "scale-connections", 100000, "Connections created for the scale part")
	flag.IntVar(&o.scaleOpts.namespaces, "scale-namespaces", 1000, "namespaces the scale part spreads them and the keys over")
	flag.IntVar(&o.scaleOpts.keys, "scale-keys", 20000, "APIKeys created at once for the scale part (a multiple of -scale-namespaces)")
	flag.IntVar(&o.scaleOpts.largest, "scale-largest", 10000, "Connections of the scale part's largest namespace")
	flag.DurationVar(&o.scaleOpts.active, "scale-active", time.Minute, "how long the scale part measures lastUsedAt writes with every key in use")
	flag.IntVar(&o.scaleOpts.restarts, "scale-restarts", 3, "fresh servers the scale part times from start to ready")
	flag.IntVar(&o.revokeN, "revoke-keys", 50, "keys revoked one by one for the revocation latency")
	flag.StringVar(&o.caddy, "caddy", caddyDefault(), "the Caddy binary of the forwardauth part ($CADDY, else `make caddy`'s)")
	flag.StringVar(&only, "only", "", "comma-separated parts to run ("+strings.Join(stepNames(), ", ")+"); all when empty")
	flag.StringVar(&o.bareListen, "bare-listen", "", "internal: serve the bare handler on this address")
	flag.StringVar(&o.bareBody, "bare-body", "", "internal: the bytes the bare handler writes")
	flag.StringVar(&o.barePprof, "bare-pprof", "", "internal: serve the bare handler's net/http/pprof on this address")
	flag.StringVar(&o.bareHeader, "bare-headers", "", "internal: a file of constant response headers (Key: value lines) the bare handler sends too")
	flag.BoolVar(&o.bareNoLimits, "bare-no-limits", false, "internal: serve the bare handler with no limits at all (net/http's defaults, no ReadHeaderTimeout)")
	flag.StringVar(&o.bareAuthzListen, "bare-authz-listen", "", "internal: serve the always-allow ext_authz server on this address")
	flag.StringVar(&o.bareAuthzResponse, "bare-authz-response", "", "internal: the CheckResponse (binary protobuf) it answers")
	flag.Parse()
	if o.bareListen != "" {
		if err := serveBare(o.bareListen, o.bareBody, o.barePprof, o.bareHeader, o.bareNoLimits); err != nil {
			fmt.Fprintln(os.Stderr, "bench: bare handler:", err)
			os.Exit(1)
		}
		return
	}
	if o.bareAuthzListen != "" {
		if err := serveBareAuthz(o.bareAuthzListen, o.bareAuthzResponse); err != nil {
			fmt.Fprintln(os.Stderr, "bench: always-allow ext_authz:", err)
			os.Exit(1)
		}
		return
	}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(stepNames(), s) {
			fmt.Fprintf(os.Stderr, "bench: unknown part %q in -only (parts: %s)\n", s, strings.Join(stepNames(), ", "))
			os.Exit(2)
		}
		o.only = append(o.only, s)
	}
	// The bench reports through its own output; controller-runtime's client would otherwise
	// complain that no logger was set.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// caddyDefault is $CADDY (the Makefile exports it), else the binary `make caddy` builds.
func caddyDefault() string {
	if c := os.Getenv("CADDY"); c != "" {
		return c
	}
	return "bin/caddy-v2.11.9"
}

// serveBare is the baseline: net/http writing pre-serialised bytes, nothing else, or with
// headerFile the same constant headers as switchboard's answer. Its profile is served on
// another listener, so the measured handler stays bare. It keeps a 5 s ReadHeaderTimeout, as
// a server facing clients must (net/http then sets a read deadline at every request), unless
// noLimits: then it is net/http with nothing set but the handler, the physical limit of a Go
// server writing those bytes.
func serveBare(addr, bodyFile, pprofAddr, headerFile string, noLimits bool) error {
	body, err := os.ReadFile(filepath.Clean(bodyFile))
	if err != nil {
		return err
	}
	header := http.Header{"Content-Type": {"application/json"}}
	if headerFile != "" {
		raw, err := os.ReadFile(filepath.Clean(headerFile))
		if err != nil {
			return err
		}
		header = http.Header{}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok {
				header[k] = []string{v}
			}
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if pprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		go func() {
			srv := &http.Server{Addr: pprofAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
			_ = srv.ListenAndServe()
		}()
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		for k, v := range header {
			h[k] = v
		}
		_, _ = w.Write(body)
	})
	if noLimits {
		// #nosec G112 -- on purpose: the bound on what any server can do, on loopback, for the bench.
		return (&http.Server{Handler: handler}).Serve(l)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: handler}
	return srv.Serve(l)
}
