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

// TestNGINXAuthRequest puts Debian's NGINX in front of the upstream with auth_request to
// switchboard's NGINX mode, /authz/nginx/<audience>, and runs every case of the contract
// through it. auth_request passes only 401 and 403 on (any other status of the subrequest
// becomes a 500) and drops the subrequest's body, so in this mode switchboard answers every
// other denial 403 with the code in X-Switchboard-Code, and the configuration below writes
// the JSON error body from that header and keeps Retry-After (auth_request itself passes a
// 401's WWW-Authenticate on). Then the nginx.conf the project ships
// (examples/gateways/nginx.conf) runs as it is, with only its addresses changed.
func TestNGINXAuthRequest(t *testing.T) {
	bin := nginxBinary(t)
	s := startForwardAuthStack(t)
	g := gateway{name: "NGINX", base: startNGINX(t, bin, func(listen string) string {
		var routes strings.Builder
		for _, r := range s.routes() {
			fmt.Fprintf(&routes, nginxRoute, r.path, r.authz, s.upstream.hostPort(), r.audience)
		}
		return fmt.Sprintf(nginxConf, listen, routes.String())
	}), nginxMode: true}
	s.checkGateway(t, g)

	t.Run("the shipped example", func(t *testing.T) {
		example := func(authz string) func(string) string {
			return func(listen string) string { return nginxExample(t, listen, authz, s.upstream.hostPort()) }
		}
		// The example turns NGINX mode's 403s back into the statuses /v1 answers.
		g := gateway{name: "NGINX (examples/gateways/nginx.conf)", base: startNGINX(t, bin, example(s.authzAddr)), stripsAuthorization: true}
		unready := gateway{name: g.name + ", never-ready server", base: startNGINX(t, bin, example(s.unreadyAuthzAddr))}
		s.checkExample(t, g, unready)
	})
}

// nginxRoute is one route of the gateway: auth_request to the route's internal location, which
// names the audience in the URI (never in anything a client sends), the identity headers
// forwarded to the upstream (replacing any a client sent), and the denials answered by the
// named locations below. %[1]s the path, %[2]s the forward-auth listener, %[3]s the upstream,
// %[4]s the audience.
const nginxRoute = `
		location /%[1]s/ {
			auth_request /_switchboard/%[1]s;
			auth_request_set $switchboard_key $upstream_http_x_switchboard_key;
			auth_request_set $switchboard_key_uid $upstream_http_x_switchboard_key_uid;
			auth_request_set $switchboard_key_hint $upstream_http_x_switchboard_key_hint;
			auth_request_set $switchboard_code $upstream_http_x_switchboard_code;
			auth_request_set $switchboard_retry_after $upstream_http_retry_after;
			error_page 401 = @switchboard_401;
			error_page 403 = @switchboard_403;
			proxy_set_header X-Switchboard-Key $switchboard_key;
			proxy_set_header X-Switchboard-Key-Uid $switchboard_key_uid;
			proxy_set_header X-Switchboard-Key-Hint $switchboard_key_hint;
			proxy_set_header X-Switchboard-Code "";
			proxy_pass http://%[3]s;
		}

		location = /_switchboard/%[1]s {
			internal;
			proxy_pass http://%[2]s/authz/nginx/%[4]s;
			proxy_pass_request_body off;
			proxy_set_header Content-Length "";
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Uri $request_uri;
			proxy_set_header X-Forwarded-Method $request_method;
		}
`

// nginxConf is the gateway's configuration (%[1]s the address, %[2]s the routes). The auth subrequest carries X-Forwarded-For with NGINX's peer
// appended ($proxy_add_x_forwarded_for), and switchboard trusts loopback, so the client address
// it judges is the hop the test sends, as that of a proxy in front of NGINX would be. (NGINX at
// the edge would send $remote_addr alone instead: a client's own X-Forwarded-For is not to be
// believed.)
const nginxConf = nginxRuntime + `
events {
	worker_connections 256;
}

http {` + nginxHTTPRuntime + `
	server {
		listen %[1]s;
%[2]s
		location @switchboard_401 {
			default_type application/json;
			add_header X-Switchboard-Code $switchboard_code always;
			return 401 '{"error":{"code":"$switchboard_code","message":"switchboard refused the request"}}\n';
		}

		location @switchboard_403 {
			default_type application/json;
			add_header X-Switchboard-Code $switchboard_code always;
			add_header Retry-After $switchboard_retry_after always;
			return 403 '{"error":{"code":"$switchboard_code","message":"switchboard refused the request"}}\n';
		}

		location / {
			return 404;
		}
	}
}
`

// nginxRuntime runs NGINX in the foreground as one process, logging to stderr, with its pid
// file in the prefix (-p, the test's temporary directory); nginxHTTPRuntime keeps its
// temporary files there too.
const (
	nginxRuntime = `daemon off;
master_process off;
error_log stderr warn;
pid nginx.pid;
`
	nginxHTTPRuntime = `
	access_log off;
	client_body_temp_path tmp/client_body;
	proxy_temp_path tmp/proxy;
	fastcgi_temp_path tmp/fastcgi;
	uwsgi_temp_path tmp/uwsgi;
	scgi_temp_path tmp/scgi;
`
)

// nginxExample is examples/gateways/nginx.conf with the test's addresses: listening on a
// loopback port, the chart's authz Service replaced by authz and the orders API by the
// upstream, run as nginxRuntime says. Nothing else of it changes.
func nginxExample(t *testing.T, listen, authz, upstream string) string {
	t.Helper()
	text := readGatewayExample(t, "nginx.conf")
	text = replaceOnce(t, "nginx.conf", text, "listen 8080;", "listen "+listen+";")
	text = replaceOnce(t, "nginx.conf", text, "server "+exampleAuthzService+";", "server "+authz+";")
	text = replaceOnce(t, "nginx.conf", text, "server "+exampleUpstream+";", "server "+upstream+";")
	text = replaceOnce(t, "nginx.conf", text, "\nhttp {\n", "\nhttp {\n"+nginxHTTPRuntime)
	return nginxRuntime + text
}

// startNGINX runs nginx with the configuration config returns for a free loopback address,
// and returns NGINX's URL.
func startNGINX(t *testing.T, bin string, config func(listen string) string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(config(addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	// -e: the error log before the configuration is read (Debian's default is a file in /var/log).
	cmd := exec.Command(bin, "-p", dir+"/", "-e", "stderr", "-c", file) //nolint:gosec // the test's NGINX and configuration
	startProcess(t, "nginx", cmd)
	waitListening(t, "NGINX", addr)
	return "http://" + addr
}
