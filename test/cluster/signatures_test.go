//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/switchboard-dev/switchboard/internal/local/cluster"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// keyPair makes a throwaway cosign key pair in a directory of its own and returns the private
// key's and the public key's paths; the private key's password is keyPassword.
func keyPair(t testing.TB, dir string) (key, pub string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cosign(dir, "generate-key-pair"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// noInternet is the environment that makes cosign's attempts to reach sigstore's TUF
// repository (for a trusted root the suite does not use: it verifies with a key, without a
// transparency log) fail at once, where the node's network namespace would let each DNS
// query time out (about 10 s per call): HTTPS goes to a closed port on loopback, except to
// the suite's own servers.
func noInternet() []string {
	return []string{"HTTPS_PROXY=http://127.0.0.1:1", "NO_PROXY=127.0.0.1,localhost," + cluster.NodeIP}
}

// keyPassword protects the suite's throwaway keys.
const keyPassword = "test/cluster"

// cosign runs cosign inside the cluster's network namespace, in dir, offline: its TUF root and
// home are the suite's, the internet fails fast (noInternet), and the private key's password
// is keyPassword.
func (s *suite) cosign(dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := s.c.Command(ctx, testenv.Cosign(), args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, "COSIGN_PASSWORD="+keyPassword, "TUF_ROOT="+filepath.Join(s.work, "tuf"), "HOME="+filepath.Join(s.work, "home"))
	cmd.Env = append(cmd.Env, noInternet()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("cosign %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// testSignatures verifies the release as its users will, with the release key's public half
// (the suite's throwaway pair): the image index and the chart in the registry by digest, and
// checksums.txt. Each verification must also fail with another key, and for an artifact the
// key did not sign: an image manifest of the index (pushed, not signed) and a changed
// checksums.txt.
func testSignatures(t *testing.T) {
	chartRef, err := name.ParseReference(localRegistry+"/charts/switchboard:"+strings.TrimPrefix(releaseVersion, "v"), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	chart, err := remote.Head(chartRef, remote.WithTransport(s.c.HTTPClient().Transport))
	if err != nil {
		t.Fatalf("the chart in the registry: %v", err)
	}
	imageRef, err := name.ParseReference(localRegistry+"/switchboard@"+s.digest, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(imageRef, remote.WithTransport(s.c.HTTPClient().Transport))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := idx.IndexManifest()
	if err != nil || len(mf.Manifests) == 0 {
		t.Fatalf("the index's manifests: %v", err)
	}
	unsigned := localRegistry + "/switchboard@" + mf.Manifests[0].Digest.String()

	_, otherPub := keyPair(t, filepath.Join(s.work, "other-key"))
	tampered := filepath.Join(t.TempDir(), "checksums.txt")
	sums, err := os.ReadFile(filepath.Join(s.files.dir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tampered, append(sums, []byte("0000000000000000000000000000000000000000000000000000000000000000  extra.tar.gz\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	sig := filepath.Join(s.files.dir, "checksums.txt.sig")
	verify := func(pub, ref string) []string {
		return []string{"verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", ref}
	}
	verifyBlob := func(pub, file string) []string {
		return []string{"verify-blob", "--key", pub, "--insecure-ignore-tlog", "--signature", sig, file}
	}
	// Each failure must be the signature's, not cosign's failing to run or to reach the registry.
	for _, c := range []struct {
		what string
		args []string
		fail string // "": must pass; else what cosign must fail with
	}{
		{"the image index", verify(s.pub, localRegistry+"/switchboard@"+s.digest), ""},
		{"the chart", verify(s.pub, localRegistry+"/charts/switchboard@"+chart.Digest.String()), ""},
		{"checksums.txt", verifyBlob(s.pub, filepath.Join(s.files.dir, "checksums.txt")), ""},
		{"the image index, with another key", verify(otherPub, localRegistry+"/switchboard@"+s.digest), "no matching signatures"},
		{"the chart, with another key", verify(otherPub, localRegistry+"/charts/switchboard@"+chart.Digest.String()), "no matching signatures"},
		{"checksums.txt, with another key", verifyBlob(otherPub, filepath.Join(s.files.dir, "checksums.txt")), "invalid signature"},
		{"an image manifest the key did not sign", verify(s.pub, unsigned), "no signatures found"},
		{"a changed checksums.txt", verifyBlob(s.pub, tampered), "invalid signature"},
	} {
		out, err := s.cosign(s.work, c.args...)
		switch {
		case c.fail == "" && err != nil:
			t.Errorf("verifying %s: %v", c.what, err)
		case c.fail != "" && err == nil:
			t.Errorf("verifying %s passed, want a failure:\n%s", c.what, out)
		case c.fail != "" && !strings.Contains(out, c.fail):
			t.Errorf("verifying %s failed without %q:\n%s", c.what, c.fail, out)
		case c.fail != "":
			t.Logf("verifying %s fails, as it must: %q", c.what, c.fail)
		}
	}
}
