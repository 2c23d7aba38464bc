//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/switchboard-dev/switchboard/internal/local/cluster"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

const (
	// releaseVersion is the version the suite cuts; releaseChanges is the changelog it cuts it
	// from (hack/release requires the version's section).
	releaseVersion = "v0.1.0"
	releaseChanges = `# Changelog

## [Unreleased]

## [0.1.0] - 2026-11-27

### Added
- The cluster suite's release.
`
	// registryPort is the registry's port inside the cluster's network namespace, which has
	// nothing else on it: no clash with the host or another cluster is possible.
	registryPort = "5000"
)

// registryHost is the registry as the node's containerd reaches it: at the node's address, not
// loopback, so that plain HTTP needs the registry's hosts.toml (containerd speaks HTTPS to any
// host but localhost), as it would for a registry elsewhere on the network.
var registryHost = net.JoinHostPort(cluster.NodeIP, registryPort)

// localRegistry is the same registry as the release tools reach it, on the namespace's
// loopback: hack/release and helm speak plain HTTP only to loopback.
var localRegistry = net.JoinHostPort("127.0.0.1", registryPort)

// serveRegistry serves an in-process OCI registry (go-containerregistry's, with the referrers
// API the SBOM needs) on every address of the cluster's network namespace; it ends with the
// test process.
func serveRegistry(c *cluster.Cluster) error {
	l, err := c.Listen("tcp", ":"+registryPort)
	if err != nil {
		return fmt.Errorf("the registry's listener: %w", err)
	}
	srv := &http.Server{
		Handler:           registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(l) }()
	return nil
}

// releaseFiles serves a release's directory over HTTP on the namespace's loopback, as the
// release's download page: the krew manifest's archives come from there.
type releaseFiles struct {
	dir, url string
}

func serveReleaseFiles(c *cluster.Cluster, dir string) (*releaseFiles, error) {
	l, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &releaseFiles{dir: dir, url: "http://" + l.Addr().String()}, nil
}

// testRelease cuts this commit's release with hack/release inside the cluster's network
// namespace, pushing its image index, SBOM and chart to the registry there, and resolves the
// index's digest from the registry: every later install pulls by it.
func testRelease(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "release")
	build := exec.Command("go", "build", "-o", bin, "./hack/release")
	build.Dir = s.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/release: %v\n%s", err, out)
	}
	changelog := filepath.Join(s.work, "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte(releaseChanges), 0o600); err != nil {
		t.Fatal(err)
	}
	validateKrew := testenv.ValidateKrewManifest()
	dir := filepath.Join(s.work, "release")
	files, err := serveReleaseFiles(s.c, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.files = files
	// The release key: a throwaway pair, whose public half testSignatures verifies with.
	key, pub := keyPair(t, filepath.Join(s.work, "release-key"))
	s.pub = pub
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := s.c.Command(ctx, bin, "-version", releaseVersion, "-dir", dir, "-registry", localRegistry, "-image-repo", registryHost+"/switchboard",
		"-helm", s.helm, "-changelog", changelog, "-krew-base-url", files.url, "-validate-krew-manifest", validateKrew, "-root", s.root,
		"-cosign", testenv.Cosign(), "-cosign-pub", pub)
	cmd.Dir = s.root
	cmd.Env = append(cmd.Env, s.cliEnv()...)
	cmd.Env = append(cmd.Env, "COSIGN_KEY="+key, "COSIGN_PASSWORD="+keyPassword, "TUF_ROOT="+filepath.Join(s.work, "tuf"))
	cmd.Env = append(cmd.Env, noInternet()...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("hack/release cut %s and pushed it to %s in %s:\n%s", releaseVersion, localRegistry, time.Since(start).Round(100*time.Millisecond), out)
	if err != nil {
		t.Fatalf("hack/release: %v", err)
	}

	ref, err := name.ParseReference(localRegistry+"/switchboard:"+releaseVersion, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref, remote.WithTransport(s.c.HTTPClient().Transport))
	if err != nil {
		t.Fatalf("the release's image index in the registry: %v", err)
	}
	if !desc.MediaType.IsIndex() {
		t.Fatalf("%s is a %s, want an image index", ref, desc.MediaType)
	}
	s.digest = desc.Digest.String()
	t.Logf("the release's image: %s@%s", s.imageRepo, s.digest)
}

// pluginIndex is the krew index the plugin is installed from by name: a local git repository
// holding the release's krew manifest as plugins/switchboard.yaml.
const pluginIndex = "switchboard-test"

// testKrewInstall installs the plugin as its users will: `kubectl krew index add` of a git
// repository holding the release's manifest, `kubectl krew install <index>/switchboard`, which
// downloads the archive for this platform from the release's files and checks its SHA-256,
// then runs the installed `kubectl switchboard version` against the cluster. krew runs inside the
// network namespace with its own KREW_ROOT: it reaches nothing but the release's files.
func testKrewInstall(t *testing.T) {
	krew := os.Getenv("KREW")
	if krew == "" {
		krew = filepath.Join(s.root, "bin", "krew-v0.4.3")
	}
	tools := t.TempDir()
	// kubectl finds krew as a plugin: kubectl-krew on PATH.
	if err := os.Symlink(krew, filepath.Join(tools, "kubectl-krew")); err != nil {
		t.Fatal(err)
	}
	root, index := t.TempDir(), t.TempDir()
	manifest, err := os.ReadFile(filepath.Join(s.files.dir, "switchboard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(manifest), "uri: "+s.files.url+"/") {
		t.Fatalf("the release's krew manifest does not download from %s:\n%s", s.files.url, manifest)
	}
	if err := os.MkdirAll(filepath.Join(index, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(index, "plugins", "switchboard.yaml"), manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "master"}, {"add", "plugins"},
		{"-c", "user.name=test", "-c", "user.email=test@example.test", "commit", "-q", "-m", "switchboard " + releaseVersion},
	} {
		git := exec.Command("git", append([]string{"-C", index}, args...)...)
		if out, err := git.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	// Without a PATH that has only these (and git), kubectl could find the working tree's
	// bin/kubectl-switchboard instead of the one krew installs.
	path := strings.Join([]string{filepath.Join(root, "bin"), tools, s.assets, "/usr/bin", "/bin"}, ":")
	env := []string{"KREW_ROOT=" + root, "KREW_NO_UPGRADE_CHECK=1", "PATH=" + path, "HOME=" + t.TempDir()}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := s.c.Command(ctx, filepath.Join(s.assets, "kubectl"), args...)
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("krew", "index", "add", pluginIndex, index)
	t.Logf("kubectl krew install:\n%s", run("krew", "install", pluginIndex+"/switchboard"))
	plugin := filepath.Join(root, "bin", "kubectl-switchboard")
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("krew installed no plugin: %v", err)
	}
	if got := run("plugin", "list"); !strings.Contains(got, plugin) {
		t.Fatalf("kubectl does not find the plugin krew installed at %s:\n%s", plugin, got)
	}
	out := run("switchboard", "version")
	t.Logf("kubectl switchboard version:\n%s", out)
	if n := strings.Count(out, releaseVersion); n < 2 {
		t.Errorf("kubectl switchboard version names %s %d times, want both the plugin's and the installation's version:\n%s", releaseVersion, n, out)
	}
}

// imageRef is the image every switchboard pod of this release runs: the registry's, by digest.
func (s *suite) imageRef() string { return s.imageRepo + "@" + s.digest }

// checkOnDigest checks that a pod runs this release's image by digest, and that the kubelet
// reports the image it pulled by that digest from the registry.
func checkOnDigest(pod, image, imageID string) error {
	if image != s.imageRef() {
		return fmt.Errorf("pod %s runs %s, want %s", pod, image, s.imageRef())
	}
	if imageID != s.imageRef() {
		return fmt.Errorf("pod %s: the kubelet reports image %s, want %s pulled from the registry", pod, imageID, s.imageRef())
	}
	return nil
}
