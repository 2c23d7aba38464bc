// Command caddy is Caddy's own entry point with its standard modules, built from the module
// proxy for the gateway tests (test/gateways) and the forward-auth benchmark (hack/bench): no
// prebuilt binary can be downloaded here, and Caddy's release builds are exactly this program.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// The standard modules: the Caddyfile adapter, reverse_proxy, forward_auth and the rest
	// of what the release binary carries.
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() {
	caddycmd.Main()
}
