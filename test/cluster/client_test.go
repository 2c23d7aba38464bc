//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// testClientFlow is the held-out contract run against the pods, through the Service only:
// apply a Connection and an APIKey with kubectl, claim the key with the plugin, list with it,
// revoke it, and be refused.
func testClientFlow(t *testing.T) {
	ctx := context.Background()
	api := s.serviceURL(t, "switchboard-api")
	// A new connection per request, so that kube-proxy spreads them over both server pods.
	spread := s.c.HTTPClient()
	spread.Transport.(*http.Transport).DisableKeepAlives = true

	connID := s.tenant(t, "tenant-a", "ci")
	key := s.claim(t, "tenant-a", "ci")
	s.issued = append(s.issued, key)

	for i := range 10 {
		r := listConnections(ctx, spread, api, key)
		if r.status != http.StatusOK {
			t.Fatalf("request %d with the claimed key: %s", i+1, r)
		}
		if ids := connectionIDs(t, r); !slices.Equal(ids, []string{connID}) {
			t.Fatalf("the key lists %v, want its namespace's connection [%s]", ids, connID)
		}
	}
	if list := s.kubectl(t, "switchboard", "key", "list", "-n", "tenant-a"); !strings.Contains(list, "ci") || !strings.Contains(list, key[:12]) {
		t.Errorf("kubectl switchboard key list does not show the key ci with its hint %s…:\n%s", key[:12], list)
	}
	if r := listConnections(ctx, spread, api, ""); r.status != http.StatusUnauthorized || r.errorCode() != "API_KEY_MISSING" {
		t.Errorf("a request without a key: %s, want 401 API_KEY_MISSING", r)
	}

	grpcAddr, forwardAuth := s.authzAddresses(t)
	checker := newGatewayChecker(t, grpcAddr)
	for i := range 10 {
		if got := checker.check(ctx, key); got != http.StatusOK {
			t.Fatalf("ext_authz Check %d through the Service with the claimed key: %d, want 200", i+1, got)
		}
		if got := forwardAuthStatus(ctx, spread, forwardAuth, key); got != http.StatusOK {
			t.Fatalf("forward-auth %d through the Service with the claimed key: %d, want 200", i+1, got)
		}
	}

	s.kubectl(t, "switchboard", "key", "revoke", "ci", "-n", "tenant-a", "--yes")
	eventually(t, 30*time.Second, "every server pod refusing the revoked key, on /v1 and to gateways", func() error {
		for i := range 20 {
			if r := listConnections(ctx, spread, api, key); r.status != http.StatusUnauthorized || r.errorCode() != "API_KEY_INVALID" {
				return fmt.Errorf("request %d: %s, want 401 API_KEY_INVALID", i+1, r)
			}
			if i >= 5 {
				// Fewer through the gateways: every 401 counts against this host's failure
				// budget (20 per replica), which /v1's 20 already half use.
				continue
			}
			if got := checker.check(ctx, key); got != http.StatusUnauthorized {
				return fmt.Errorf("ext_authz Check %d: %d, want 401", i+1, got)
			}
			if got := forwardAuthStatus(ctx, spread, forwardAuth, key); got != http.StatusUnauthorized {
				return fmt.Errorf("forward-auth %d: %d, want 401", i+1, got)
			}
		}
		return nil
	})
}
