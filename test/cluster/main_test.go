//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-dev/switchboard/internal/local/cluster"
	"github.com/switchboard-dev/switchboard/internal/local/image"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// suite is the one cluster every test of the package uses, and what reaches it.
type suite struct {
	c      *cluster.Cluster
	root   string // the repository
	assets string // bin/k8s/<version>: kubectl and the cluster's binaries
	helm   string
	work   string // the suite's files: the release, helm's homes
	files  *releaseFiles
	// kustomized is what testKustomize applied.
	kustomized string
	// imageRepo is the release's image repository in the registry in the cluster's network
	// namespace, and digest its image index's digest there (testRelease).
	imageRepo, digest string
	// pub is the public half of the throwaway key the release is signed with.
	pub    string
	k8s    client.Client
	cs     kubernetes.Interface
	issued []string // every key the suite was given, for testNoLeaks
	logs   []string // the logs of pods that are gone, for testNoLeaks
}

var s *suite

// stateGlob matches the state dirs of this suite's clusters, so that a run can remove the
// cluster of an earlier run that was killed before it could.
var stateGlob = filepath.Join(os.TempDir(), "switchboard-cluster-test-*")

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "test/cluster: "+format+"\n", args...)
		return 1
	}
	stale, _ := filepath.Glob(stateGlob)
	for _, dir := range stale {
		if cluster.Stale(dir) {
			fmt.Fprintf(os.Stderr, "test/cluster: removing the cluster a killed run left in %s\n", dir)
			if err := cluster.Down(dir); err != nil {
				return fail("%v", err)
			}
		}
	}
	root := testenv.RepoRoot()
	st := &suite{root: root, assets: testenv.AssetsDir(), helm: testenv.Tool("HELM", "helm-v3.22.0")}
	imageDir := filepath.Join(root, "bin", "image")
	// The switchboard image is not among them: the node pulls it from the suite's registry.
	imgs := []string{filepath.Join(imageDir, "pause.tar"), filepath.Join(imageDir, "consumer.tar")}
	var names []string
	for _, img := range imgs {
		name, err := image.TarballName(img)
		if err != nil {
			return fail("%v: run `make pause-image consumer-image` (make test-cluster does)", err)
		}
		names = append(names, name)
	}
	st.imageRepo = registryHost + "/switchboard"
	dir, err := os.MkdirTemp("", "switchboard-cluster-test-")
	if err != nil {
		return fail("%v", err)
	}
	if st.work, err = os.MkdirTemp("", "switchboard-cluster-work-"); err != nil {
		return fail("%v", err)
	}
	defer func() { _ = os.RemoveAll(st.work) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{
		Name: fmt.Sprintf("sb-test-%d", os.Getpid()), Dir: dir, Assets: st.assets,
		Images: imgs, SandboxImage: names[0], Registries: []string{registryHost}, Progress: os.Stderr,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return fail("starting the cluster: %v", err)
	}
	fmt.Fprintf(os.Stderr, "test/cluster: cluster ready in %s\n", time.Since(start).Round(100*time.Millisecond))
	// Ctrl-C or a kill must not leave the cluster running.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "test/cluster: %s: removing the cluster\n", sig)
		_ = c.Stop()
		os.Exit(1)
	}()
	defer func() {
		start := time.Now()
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "test/cluster: removing the cluster: %v\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "test/cluster: cluster removed in %s\n", time.Since(start).Round(100*time.Millisecond))
		}
	}()
	st.c = c
	if err := serveRegistry(c); err != nil {
		return fail("%v", err)
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return fail("%v", err)
	}
	if st.k8s, err = client.New(cfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		return fail("%v", err)
	}
	if st.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return fail("%v", err)
	}
	s = st
	return m.Run()
}
