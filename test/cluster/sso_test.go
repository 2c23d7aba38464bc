//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPanelSSO upgrades the release with single sign-on in impersonate mode, as the README
// shows (the client secret from an existing Secret): the panel pods start with the chart's
// constrained-impersonation grant (the panel refuses to start when it does not work) and
// answer their sign-in page through the Service, offering the provider's sign-in beside the
// token form. The provider is not reachable from the cluster: the panel discovers it on the
// first sign-in, so it starts without it.
func testPanelSSO(t *testing.T) {
	s.apply(t, `apiVersion: v1
kind: Secret
metadata:
  name: panel-oidc
  namespace: `+systemNamespace+`
stringData:
  client-secret: not-a-real-secret
`)
	s.must(t, "", s.helm, "upgrade", release, filepath.Join(s.root, "charts", "switchboard"), "--namespace", systemNamespace,
		"--reuse-values", "--wait", "--timeout", "4m",
		"--set", "panel.oidc.enabled=true",
		"--set", "panel.oidc.issuerURL=https://idp.example.test",
		"--set", "panel.oidc.clientID=switchboard",
		"--set", "panel.oidc.clientSecret.secretName=panel-oidc",
		"--set", "panel.oidc.redirectURL=https://switchboard.example.test/oidc/callback",
		"--set", "panel.oidc.mode=impersonate",
		"--set", "panel.oidc.providerName=Example")
	s.readyDeployment(t, "switchboard-panel", 3*time.Minute)
	base := s.serviceURL(t, "switchboard-panel")
	browser := s.c.HTTPClient()
	eventually(t, time.Minute, "the sign-in page offering single sign-on", func() error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/", nil)
		if err != nil {
			return err
		}
		resp, err := browser.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Sign in with Example") || !strings.Contains(body, `href="/oidc/login"`) {
			return fmt.Errorf("GET / answered %d:\n%.400s", resp.StatusCode, body)
		}
		return nil
	})
	// Not the chart's: helm uninstall, next, would leave it, and that step counts what stays.
	s.kubectl(t, "delete", "secret", "panel-oidc", "-n", systemNamespace)
}
