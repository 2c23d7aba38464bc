package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/hack/bench/loadgen"
)

// The "forwardauth" part: what switchboard's HTTP forward-auth costs behind a real gateway. One
// Caddy process (`make caddy`) serves two sites in front of the same upstream, the bare handler
// writing a small JSON body: one proxies straight to it, the other first asks switchboard's
// forward-auth listener (`switchboard server --authz-http-listen`, /authz/bench) with
// forward_auth and copies the key's identity headers to the upstream, as test/gateways
// configures it. Every request carries the same valid key. wrk rounds, interleaved, give the
// throughput of each site and of the forward-auth endpoint asked directly; open-loop runs at
// lightRate give the latency the check adds. Last, keys are revoked one by one while a client
// polls through Caddy, as the revocation part does on /v1.

// forwardAuthResult is what the forwardauth part measured.
type forwardAuthResult struct {
	// plainRPS, authRPS and directRPS are the wrk rounds' requests per second of Caddy without
	// auth, Caddy with forward_auth, and switchboard's /authz/bench alone.
	plainRPS, authRPS, directRPS []float64
	// plain and auth are open-loop runs at lightRate through each site.
	plain, auth loadgen.Result
	// revocations are, for each key revoked, the time from the patch to the first 401 through
	// Caddy.
	revocations           []time.Duration
	bodyBytes             int
	conns                 int
	duration              time.Duration
	caddyVersion          string
	loadBefore, loadAfter string
}

// forwardAuthRevocations is how many keys are revoked one by one while a client polls Caddy.
const forwardAuthRevocations = 20

// forwardAuthBody is the upstream's answer: small, so that what is measured is the proxying
// and the check, not the copying of a body.
const forwardAuthBody = `{"ok":true,"items":[{"id":"item_1","name":"first"},{"id":"item_2","name":"second"}]}` + "\n"

// forwardAuthCaddyfile: %[1]s the plain site's port, %[2]s the site with forward_auth, %[3]s
// switchboard's forward-auth listener, %[4]s the upstream. No logs, no admin endpoint.
const forwardAuthCaddyfile = `{
	admin off
	persist_config off
	auto_https off
}

http://:%[1]s {
	bind 127.0.0.1
	reverse_proxy %[4]s
}

http://:%[2]s {
	bind 127.0.0.1
	forward_auth %[3]s {
		uri /authz/bench
		copy_headers X-Switchboard-Key X-Switchboard-Key-Uid X-Switchboard-Key-Hint
	}
	reverse_proxy %[4]s
}
`

func (r *rig) forwardAuth(ctx context.Context, o options) error {
	if err := checkWrk(); err != nil {
		return err
	}
	if _, err := os.Stat(o.caddy); err != nil {
		return fmt.Errorf("the Caddy binary is missing (%w): `make caddy` builds it into bin/, or pass -caddy", err)
	}
	caddyVersion, err := exec.CommandContext(ctx, o.caddy, "version").Output() // #nosec G204 -- the bench runs its own Caddy.
	if err != nil {
		return fmt.Errorf("%s version: %w", o.caddy, err)
	}
	const ns = "bench-forwardauth"
	revoked := make([]string, forwardAuthRevocations)
	for i := range revoked {
		revoked[i] = fmt.Sprintf("revoke-%02d", i)
	}
	c, keys, err := r.tenant(ctx, ns, 0, append([]string{"gateway"}, revoked...)...)
	if err != nil {
		return err
	}
	key := keys["gateway"]

	addrs, err := freeAddrs(3)
	if err != nil {
		return err
	}
	authz, plain, guarded := addrs[0], addrs[1], addrs[2]
	// Its own server, with the listener on: the rig's keeps the defaults the other parts measure.
	// Caddy is its trusted proxy, as docs/gateways.md has a gateway be: a gateway's connections
	// come from one address, past the share of one client.
	srv, _, err := r.startServer(ctx, "server-authz", "--authz-http-listen="+authz, "--metrics-bind-address=", "--trusted-proxies=127.0.0.1/32")
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := waitStatus(ctx, "http://"+authz+"/authz/bench", key, http.StatusOK); err != nil {
		return err
	}
	bare, upstream, err := r.startBare(ctx, "forwardauth-upstream", "forwardauth-body.json", []byte(forwardAuthBody))
	if err != nil {
		return err
	}
	defer bare.stop()

	caddyDir := filepath.Join(r.dir, "caddy")
	if err := os.MkdirAll(caddyDir, 0o700); err != nil {
		return err
	}
	config := filepath.Join(caddyDir, "Caddyfile")
	if err := os.WriteFile(config, fmt.Appendf(nil, forwardAuthCaddyfile, port(plain), port(guarded), authz, upstream), 0o600); err != nil {
		return err
	}
	caddyEnv := []string{"HOME=" + caddyDir, "XDG_DATA_HOME=" + filepath.Join(caddyDir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(caddyDir, "config")}
	caddy, err := startProc("caddy", r.dir, caddyEnv, o.caddy, "run", "--config", config, "--adapter", "caddyfile")
	if err != nil {
		return err
	}
	defer caddy.stop()
	plainURL, guardedURL, directURL := "http://"+plain+"/items", "http://"+guarded+"/items", "http://"+authz+"/authz/bench"
	for _, check := range []struct {
		url, key string
		want     int
	}{{plainURL, key, http.StatusOK}, {guardedURL, key, http.StatusOK}, {guardedURL, "", http.StatusUnauthorized}} {
		if err := waitStatus(ctx, check.url, check.key, check.want); err != nil {
			return fmt.Errorf("through Caddy (see %s): %w", filepath.Join(r.dir, "caddy.log"), err)
		}
	}

	res := &forwardAuthResult{bodyBytes: len(forwardAuthBody), conns: o.conns, duration: o.duration,
		caddyVersion: strings.Fields(string(caddyVersion) + " ?")[0], loadBefore: loadAverage()}
	header := bearerLine(key)
	if err := wrkRounds(ctx, "forwardauth", o, []wrkSide{
		{"Caddy", plainURL, header, &res.plainRPS},
		{"Caddy + forward_auth", guardedURL, header, &res.authRPS},
		{"/authz alone", directURL, header, &res.directRPS},
	}); err != nil {
		return err
	}
	errs, err := openLoops(ctx, lightRate, openRun{plainURL, key, &res.plain}, openRun{guardedURL, key, &res.auth})
	if err != nil {
		return err
	}
	if errs > 0 {
		return fmt.Errorf("open loop through Caddy: %d errors", errs)
	}
	for _, name := range revoked {
		if err := waitStatus(ctx, guardedURL, keys[name], http.StatusOK); err != nil {
			return err
		}
		took, err := revokeOne(ctx, c, ns, name, keys[name], guardedURL)
		if err != nil {
			return fmt.Errorf("revoking through Caddy: %w", err)
		}
		res.revocations = append(res.revocations, took)
	}
	res.loadAfter = loadAverage()
	r.report.forwardAuth = res
	return nil
}

// port is the port of host:port.
func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// waitStatus waits up to a minute until GET url with key ("" sends none) answers want.
func waitStatus(ctx context.Context, url, key string, want int) error {
	deadline := time.Now().Add(time.Minute)
	last := errors.New("no answer")
	for time.Now().Before(deadline) {
		a, err := get(ctx, url, key)
		if err == nil {
			if a.code == want {
				return nil
			}
			err = fmt.Errorf("answered %s", a.status)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("GET %s did not answer %d within a minute: %w", url, want, last)
}

func (r *report) writeForwardAuth(p printer) {
	res := r.forwardAuth
	plain, auth, direct := median(res.plainRPS), median(res.authRPS), median(res.directRPS)
	p("## 11. Forward-auth through Caddy: what the check adds to a gateway")
	p("")
	p("Caddy %s (`make caddy`) serves two sites in front of the same upstream, a bare `net/http` handler writing a", res.caddyVersion)
	p("%d-byte JSON body: one proxies straight to it (`reverse_proxy`), the other first asks `switchboard server", res.bodyBytes)
	p("--authz-http-listen` (`forward_auth … { uri /authz/bench; copy_headers X-Switchboard-Key … }`), as test/gateways")
	p("configures it. Every request carries the same valid key, so every check is a 200 and each request through the")
	p("second site is two proxied requests. `wrk -t1 -c%d -d%s` rounds (%d, rotating who goes first; medians); the", res.conns, res.duration, len(res.plainRPS))
	p("forward-auth endpoint asked directly shows what the check alone serves. Load average before and after: %s, %s.", res.loadBefore, res.loadAfter)
	p("")
	writeRatioRows(p, "target", "Caddy alone", []rpsRow{{"Caddy → upstream", res.plainRPS},
		{"Caddy + forward_auth → switchboard, then upstream", res.authRPS}, {"switchboard `/authz/bench` alone", res.directRPS}})
	p("")
	p("Latency, open loop at %d/s for 10 s through each site (`hack/bench/loadgen`, 16 connections):", lightRate)
	p("")
	writeLatencyRows(p, "site", []latencyRow{{"Caddy → upstream", res.plain}, {"Caddy + forward_auth", res.auth}})
	p("")
	p("**forward_auth adds %s at p50 and %s at p99** (the difference of the rows) and keeps %.0f%% of Caddy's throughput,",
		ms(res.auth.Percentile(0.5)-res.plain.Percentile(0.5)), ms(res.auth.Percentile(0.99)-res.plain.Percentile(0.99)), 100*auth/plain)
	p("with Caddy, switchboard, the upstream and the load generator sharing %d cores; the check alone serves %.1f× the", r.cores, direct/auth)
	p("requests Caddy with forward_auth does.")
	p("")
	rev := slices.Clone(res.revocations)
	slices.Sort(rev)
	p("Revocation through Caddy, as section 3 measures it on /v1: for each of %d keys, a client polls the forward_auth", len(rev))
	p("site every millisecond while the bench patches `spec.revoked: true`; from the start of the patch to the first 401:")
	p("")
	p("| keys | p50 | p99 | max |")
	p("|---|---|---|---|")
	p("| %d | %s | %s | %s |", len(rev), ms(percentile(rev, 0.5)), ms(percentile(rev, 0.99)), ms(percentile(rev, 1)))
	p("")
}
