package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Helm is $HELM (the Makefile exports it), else bin/helm-v3.22.0, which `make helm-lint` (and
// `make test`) installs; the test fails saying so when it is missing.
func Helm(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("HELM")
	if bin == "" {
		bin = filepath.Join(RepoRoot(), "bin", "helm-v3.22.0")
	}
	if _, err := os.Stat(bin); err != nil { //nolint:gosec // a path the Makefile or the repository gives, in tests
		t.Fatalf("helm is missing at %s: run `make helm-lint` to install it (%v)", bin, err)
	}
	return bin
}
