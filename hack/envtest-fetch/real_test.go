//go:build !unit

package main

import (
	"archive/tar"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestFetchedControlPlaneStarts fetches a tarball of the real etcd, kube-apiserver and kubectl
// (the ones `make envtest` put in bin/k8s/<version>) from a loopback index, then starts envtest's
// control plane from the fetched directory and reaches it with the fetched kubectl: what
// `make dev` downloads is what it runs.
func TestFetchedControlPlaneStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("packs and starts the real control plane")
	}
	assets := testenv.AssetsDir()
	entries := []entry{{name: tarballDir + "/", typeflag: tar.TypeDir}}
	for _, b := range Binaries {
		body, err := os.ReadFile(filepath.Join(assets, b)) //nolint:gosec // the control plane's own binary
		if err != nil {
			t.Fatalf("%v (run `make envtest` first)", err)
		}
		entries = append(entries, entry{name: tarballDir + "/" + b, typeflag: tar.TypeReg, body: string(body)})
	}
	tarball := makeTarball(t, entries)
	srv := serve(t, tarball, sha512Hex(tarball))
	o := options(t, srv.URL, sha512Hex(tarball))
	if err := Fetch(context.Background(), o); err != nil {
		t.Fatalf("Fetch: %v", err)
	}

	env := &envtest.Environment{BinaryAssetsDirectory: o.Dest}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the control plane from the fetched %s: %v", o.Dest, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, cfg.Host, "", kubeconfig); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(o.Dest, "kubectl"), "--kubeconfig", kubeconfig, "get", "namespace", "default", "-o", "name").CombinedOutput() //nolint:gosec // the fetched kubectl
	if err != nil || strings.TrimSpace(string(out)) != "namespace/default" {
		t.Fatalf("the fetched kubectl: %v: %s", err, out)
	}
}
