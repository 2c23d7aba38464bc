//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testKustomize installs config/default with the release's image by digest (an overlay, as a user's own
// kustomization would set it) and checks that it reaches Ready and serves: the key issued under
// the Helm release still works, because the hash Secrets outlived the uninstall, and a new
// APIKey is issued by the new operator.
func testKustomize(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// kustomize takes a base only as a relative path.
	base, err := filepath.Rel(dir, filepath.Join(s.root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/switchboard-dev/switchboard
    newName: %s
    digest: %s
`, base, s.imageRepo, s.digest)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
		t.Fatal(err)
	}
	s.kubectl(t, "apply", "-k", dir)
	// testUpgradeFromPrevious removes it, for a clean slate.
	s.kustomized = s.kubectl(t, "kustomize", dir)
	s.readyDeployment(t, "switchboard-operator", 3*time.Minute)
	s.readyDeployment(t, "switchboard-server", 3*time.Minute)

	api := s.serviceURL(t, "switchboard-api")
	c := s.c.HTTPClient()
	kept := s.issued[len(s.issued)-1] // the failover's last key, issued under the Helm release
	eventually(t, time.Minute, "the key issued under Helm accepted", func() error {
		if r := listConnections(ctx, c, api, kept); r.status != http.StatusOK {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	testPanel(t)
	connID := s.tenant(t, "tenant-d", "after")
	key := s.claim(t, "tenant-d", "after")
	s.issued = append(s.issued, key)
	r := listConnections(ctx, c, api, key)
	if r.status != http.StatusOK || len(connectionIDs(t, r)) != 1 || connectionIDs(t, r)[0] != connID {
		t.Fatalf("the key issued by the kustomize install: %s", r)
	}
}
