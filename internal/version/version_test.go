package version

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Kubernetes release is pinned in hack/kube-version for the Makefile and scripts, and
// built from the module in hack/tools/envtest/kubernetes: all three must name one release.
func TestKubernetesMatchesThePin(t *testing.T) {
	root := filepath.Join("..", "..")
	pin, err := os.ReadFile(filepath.Join(root, "hack", "kube-version"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(pin)); got != Kubernetes {
		t.Errorf("hack/kube-version says %s, version.Kubernetes says %s: change both together", got, Kubernetes)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "hack", "tools", "envtest", "kubernetes", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^(?:require)?\s*k8s\.io/kubernetes v(\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("hack/tools/envtest/kubernetes/go.mod requires no k8s.io/kubernetes")
	}
	if string(m[1]) != Kubernetes {
		t.Errorf("the envtest module builds k8s.io/kubernetes v%s, version.Kubernetes says %s", m[1], Kubernetes)
	}
}
