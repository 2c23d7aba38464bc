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
// 401's WWW-Authenticate on).
func TestNGINXAuthRequest(t *testing.T) {
	bin := nginxBinary(t)
	s := startForwardAuthStack(t)
	g := gateway{name: "NGINX", base: startNGINX(t, bin, s), nginxMode: true}
	s.checkGateway(t, g)
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

// nginxConf runs NGINX in the foreground as one process, with every path in the test's
// temporary directory (-p). The auth subrequest carries X-Forwarded-For with NGINX's peer
// appended ($proxy_add_x_forwarded_for), and switchboard trusts loopback, so the client address
// it judges is the hop the test sends, as that of a proxy in front of NGINX would be. (NGINX at
// the edge would send $remote_addr alone instead: a client's own X-Forwarded-For is not to be
// believed.)
const nginxConf = `daemon off;
master_process off;
worker_processes 1;
error_log stderr warn;
pid nginx.pid;

events {
	worker_connections 256;
}

http {
	access_log off;
	client_body_temp_path tmp/client_body;
	proxy_temp_path tmp/proxy;
	fastcgi_temp_path tmp/fastcgi;
	uwsgi_temp_path tmp/uwsgi;
	scgi_temp_path tmp/scgi;

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

// startNGINX runs nginx with the configuration on a free loopback port and returns its URL.
func startNGINX(t *testing.T, bin string, s *forwardAuthStack) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	var routes strings.Builder
	for _, r := range s.routes() {
		fmt.Fprintf(&routes, nginxRoute, r.path, r.authz, s.upstream.hostPort(), r.audience)
	}
	config := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(config, fmt.Appendf(nil, nginxConf, addr, routes.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// -e: the error log before the configuration is read (Debian's default is a file in /var/log).
	cmd := exec.Command(bin, "-p", dir+"/", "-e", "stderr", "-c", config) //nolint:gosec // the test's NGINX and configuration
	startProcess(t, "nginx", cmd)
	waitListening(t, "NGINX", addr)
	return "http://" + addr
}
