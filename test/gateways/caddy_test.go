//go:build !unit

package gateways

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestCaddyForwardAuth puts Caddy's forward_auth in front of the upstream, asking switchboard
// /authz/<audience> for each route, and runs every case of the contract through it: Caddy
// passes a denial's status, headers and JSON body to the client as switchboard wrote them, and
// copies the identity headers of an allowed request to the upstream.
func TestCaddyForwardAuth(t *testing.T) {
	bin := caddyBinary(t)
	s := startForwardAuthStack(t)
	g := gateway{name: "Caddy", base: startCaddy(t, bin, s)}
	s.checkGateway(t, g)
}

// caddyfile is the gateway's configuration, as an operator of Caddy would write it (%[1]s the
// port, %[2]s the routes). Caddy believes X-Forwarded-For from loopback (the test client
// stands for a proxy in front of Caddy), so it passes the client's hop on to switchboard.
const caddyfile = `{
	admin off
	persist_config off
	auto_https off
	servers {
		trusted_proxies static 127.0.0.1/32
	}
}

http://:%[1]s {
	bind 127.0.0.1
%[2]s
	handle {
		respond "no route" 404
	}
}
`

// caddyRoute is one route: forward_auth naming the route's audience in the URI (never in
// anything a client sends), the identity headers copied to the upstream request (replacing
// any the client sent), then the upstream. %[1]s the path, %[2]s the forward-auth listener,
// %[3]s the audience, %[4]s the upstream.
const caddyRoute = `
	handle /%[1]s/* {
		forward_auth %[2]s {
			uri /authz/%[3]s
			copy_headers X-Switchboard-Key X-Switchboard-Key-Uid X-Switchboard-Key-Hint
		}
		reverse_proxy %[4]s
	}
`

// startCaddy runs `caddy run` with the Caddyfile on a free loopback port and returns its URL.
// Caddy keeps its state in the test's temporary directory.
func startCaddy(t *testing.T, bin string, s *forwardAuthStack) string {
	t.Helper()
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	var routes strings.Builder
	for _, r := range s.routes() {
		fmt.Fprintf(&routes, caddyRoute, r.path, r.authz, r.audience, s.upstream.hostPort())
	}
	config := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(config, fmt.Appendf(nil, caddyfile, portOf(t, addr), routes.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", config, "--adapter", "caddyfile") //nolint:gosec // the test's Caddy and configuration
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	startProcess(t, "caddy", cmd)
	waitListening(t, "Caddy", addr)
	return "http://" + addr
}
