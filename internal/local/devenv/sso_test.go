//go:build !unit

package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// syncBuffer is dev's output, read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDevSSO runs `switchboard dev --sso` in-process and signs in with the user and password it
// prints, on the local provider's own login page (over HTTP, as a browser without JavaScript):
// the panel's keys page then shows oidc:dev and the demo namespace's key, so the dev API server
// trusts the provider and the person's group may manage the demo keys.
func TestDevSSO(t *testing.T) {
	provider, err := testenv.OIDCProviderBinary()
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{StateDir: stateDir, Listen: testenv.FreeAddr(t), PanelListen: testenv.FreeAddr(t),
			Assets: testenv.AssetsDir(), SystemNamespace: switchboardv1alpha1.DefaultSystemNamespace, KeyPrefix: apikey.DefaultPrefix,
			Out: out, SSO: true, OIDCProvider: provider})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	testenv.Eventually(t, 3*time.Minute, "dev to be ready", func() error {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("dev stopped: %v\n%s", err, out.String())
		default:
		}
		if !strings.Contains(out.String(), "ready in") {
			return io.EOF
		}
		return nil
	})
	banner := out.String()
	m := regexp.MustCompile(`panel \(API keys\):  (\S+)\n\s+sign in with single sign-on as user dev, password (\S+) \(the local provider at (\S+)\)`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("the banner does not say how to sign in with single sign-on:\n%s", banner)
	}
	panelURL, password := m[1], m[2]
	pem, err := os.ReadFile(filepath.Join(stateDir, ssoCAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	jar, _ := cookiejar.New(nil)
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		// A browser resolves every name under .localhost to this machine; so does this client.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return dialer.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		},
	}}
	read := func(method, target string, form url.Values) (string, *url.URL) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, target, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", resp.Request.URL, resp.StatusCode, b)
		}
		return string(b), resp.Request.URL
	}
	loginPage, at := read(http.MethodGet, panelURL+"oidc/login", nil)
	id := regexp.MustCompile(`name="id" value="([^"]+)"`).FindStringSubmatch(loginPage)
	if id == nil {
		t.Fatalf("no login form at %s:\n%s", at, loginPage)
	}
	signedIn, at := read(http.MethodPost, at.Scheme+"://"+at.Host+"/login/username", url.Values{"id": {id[1]}, "username": {SSOUser}, "password": {password}})
	if !strings.Contains(signedIn, `id="continue"`) {
		t.Fatalf("after logging in, %s shows:\n%s", at, signedIn)
	}
	keys, _ := read(http.MethodGet, panelURL+"keys?namespace="+DemoNamespace, nil)
	if !strings.Contains(keys, "oidc:dev") || !strings.Contains(keys, `data-key="`+DemoAPIKeyName+`"`) {
		t.Fatalf("the keys page does not show oidc:dev and the demo key:\n%s", keys)
	}
}
