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

// TestFetchedControlPlaneStarts fetches the real etcd, kube-apiserver and kubectl (the ones
// `make envtest` put in bin/k8s/<version>), laid out as their releases publish them, from a
// loopback server, then starts envtest's control plane from the fetched directory and reaches
// it with the fetched kubectl: what `make dev` downloads is what it runs.
func TestFetchedControlPlaneStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("packs and starts the real control plane")
	}
	assets := testenv.AssetsDir()
	rel := newRelease(t)
	pins := map[string]string{}
	for _, b := range Binaries[:3] {
		body, err := os.ReadFile(filepath.Join(assets, b)) //nolint:gosec // the control plane's own binary
		if err != nil {
			t.Fatalf("%v (run `make envtest` first)", err)
		}
		if b == "etcd" {
			body = makeTarGz(t, []entry{{name: etcdDir + "/", typeflag: tar.TypeDir}, {name: etcdDir + "/etcd", typeflag: tar.TypeReg, body: string(body)}})
		}
		rel.files[artifactPath(b)] = body
		pins[b] = sha512Hex(body)
	}
	o := options(t, rel.URL, pins)
	if missing, err := Fetch(context.Background(), o, Binaries[:3]); err != nil || len(missing) != 0 {
		t.Fatalf("Fetch = %v, %v", missing, err)
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
