package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Tool is the path of a tool the Makefile builds into bin/ and exports in env (HELM, COSIGN):
// $env when set, else bin/file. Tests and suites that run outside a testing.T (TestMain) share
// this one lookup; the caller says what to run when the file is missing.
func Tool(env, file string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	return filepath.Join(RepoRoot(), "bin", file)
}

// Helm is $HELM (the Makefile exports it), else bin/helm-v3.22.0, which `make helm-lint` (and
// `make test`) installs; the test fails saying so when it is missing.
func Helm(t testing.TB) string {
	t.Helper()
	bin := Tool("HELM", "helm-v3.22.0")
	if _, err := os.Stat(bin); err != nil { //nolint:gosec // a path the Makefile or the repository gives, in tests
		t.Fatalf("helm is missing at %s: run `make helm-lint` to install it (%v)", bin, err)
	}
	return bin
}

// Cosign is $COSIGN (the Makefile exports it), else bin/cosign-v2.6.5, which `make cosign`
// builds.
func Cosign() string { return Tool("COSIGN", "cosign-v2.6.5") }

// ValidateKrewManifest is $VALIDATE_KREW_MANIFEST (the Makefile exports it), else
// bin/validate-krew-manifest-v0.4.3, which `make krew` builds.
func ValidateKrewManifest() string {
	return Tool("VALIDATE_KREW_MANIFEST", "validate-krew-manifest-v0.4.3")
}
