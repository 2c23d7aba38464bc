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
// copies the identity headers of an allowed request to the upstream. Then the Caddyfile the
// project ships (examples/gateways/Caddyfile) runs as it is, with only its addresses changed.
func TestCaddyForwardAuth(t *testing.T) {
	bin := caddyBinary(t)
	s := startForwardAuthStack(t)
	g := gateway{name: "Caddy", base: startCaddy(t, bin, func(port string) string {
		var routes strings.Builder
		for _, r := range s.routes() {
			fmt.Fprintf(&routes, caddyRoute, r.path, r.authz, r.audience, s.upstream.hostPort())
		}
		return fmt.Sprintf(caddyfile, port, routes.String())
	})}
	s.checkGateway(t, g)

	t.Run("the shipped example", func(t *testing.T) {
		example := func(authz string) func(string) string {
			return func(port string) string { return caddyExample(t, port, authz, s.upstream.hostPort()) }
		}
		g := gateway{name: "Caddy (examples/gateways/Caddyfile)", base: startCaddy(t, bin, example(s.authzAddr)), stripsAuthorization: true}
		unready := gateway{name: g.name + ", never-ready server", base: startCaddy(t, bin, example(s.unreadyAuthzAddr))}
		s.checkExample(t, g, unready)
	})
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

// caddyExample is examples/gateways/Caddyfile with the test's addresses: served over HTTP on
// a loopback port, the chart's authz Service replaced by authz and the orders API by the
// upstream, with Caddy's admin endpoint off. Nothing else of it changes.
func caddyExample(t *testing.T, port, authz, upstream string) string {
	t.Helper()
	text := readGatewayExample(t, "Caddyfile")
	text = replaceOnce(t, "Caddyfile", text, "api.example.com {", "http://:"+port+" {\n\tbind 127.0.0.1")
	text = replaceOnce(t, "Caddyfile", text, exampleAuthzService, authz)
	text = replaceOnce(t, "Caddyfile", text, exampleUpstream, upstream)
	return "{\n\tadmin off\n\tpersist_config off\n}\n\n" + text
}

// startCaddy runs `caddy run` with the Caddyfile config returns for a free loopback port, and
// returns Caddy's URL. Caddy keeps its state in the test's temporary directory.
func startCaddy(t *testing.T, bin string, config func(port string) string) string {
	t.Helper()
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(config(portOf(t, addr))), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile") //nolint:gosec // the test's Caddy and configuration
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	startProcess(t, "caddy", cmd)
	waitListening(t, "Caddy", addr)
	return "http://" + addr
}
