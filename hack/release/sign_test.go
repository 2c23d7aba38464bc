//go:build !unit

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// testPassword is the throwaway keys' password.
const testPassword = "throwaway"

// offline keeps cosign off the network, as a release is signed and verified: its TUF cache in a
// temporary directory, and every request but to loopback (the tests' registries) to a closed port.
func offline(t *testing.T) {
	t.Setenv("TUF_ROOT", t.TempDir())
	t.Setenv("SIGSTORE_NO_CACHE", "true")
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
		t.Setenv(v, "http://127.0.0.1:9")
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
}

// keyPair generates a throwaway cosign key pair, as the maintainers generate the release's
// (`cosign generate-key-pair`), and returns its private and public halves' files.
func keyPair(t testing.TB) (key, pub string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(testenv.Cosign(), "generate-key-pair") //nolint:gosec // the test's cosign
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+testPassword)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v: %s", err, b)
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// cosignVerify runs cosign verify or verify-blob as a user would, offline, and fails t when it fails.
func cosignVerify(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command(testenv.Cosign(), args...).CombinedOutput() //nolint:gosec // the test's cosign
	if err != nil {
		t.Errorf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// verifyBlob checks checksums.txt's signature in dir with pub, and that the release carries pub.
func verifyBlob(t testing.TB, pub, dir string) {
	t.Helper()
	if got, want := readFile(t, filepath.Join(dir, pubFile)), readFile(t, pub); got != want {
		t.Errorf("the release's cosign.pub is not the release key's public half:\n%s", got)
	}
	cosignVerify(t, "verify-blob", "--key", pub, "--insecure-ignore-tlog",
		"--signature", filepath.Join(dir, checksumsSigFile), filepath.Join(dir, "checksums.txt"))
}

// verifyImage resolves tag (an image or chart in a loopback registry) to its digest and checks
// cosign's signature of that digest with pub.
func verifyImage(t testing.TB, pub, tag string) {
	t.Helper()
	ref, err := name.NewTag(tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	cosignVerify(t, "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry",
		ref.Context().Digest(desc.Digest.String()).String())
}

// checkSignatures checks every signature of the release in dir with pub: checksums.txt's, and
// the signatures of tags' digests (its image index and chart) in the registry.
func checkSignatures(t testing.TB, pub, dir string, tags ...string) {
	verifyBlob(t, pub, dir)
	for _, tag := range tags {
		verifyImage(t, pub, tag)
	}
}

// typedManifest is a manifest remote.Put writes as it is, with its media type.
type typedManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m typedManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m typedManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// pushAltered pushes a copy of tag's manifest with one more annotation under tag "altered" in
// the same repository (an artifact no one signed, its blobs those of a signed one) and returns
// that tag.
func pushAltered(t testing.TB, tag string) string {
	t.Helper()
	ref, err := name.NewTag(tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	ann, _ := m["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann["altered"] = "after signing"
	m["annotations"] = ann
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	altered := ref.Context().Tag("altered")
	if err := remote.Put(altered, typedManifest{raw: b, mt: desc.MediaType}); err != nil {
		t.Fatal(err)
	}
	return altered.String()
}

// TestRefusesToSignWithoutTheReleaseKey shows make release refusing, before it builds anything,
// a release it could not sign or would sign with a key users cannot verify: no COSIGN_KEY, no
// committed cosign.pub, another key pair's private half, the wrong password.
func TestRefusesToSignWithoutTheReleaseKey(t *testing.T) {
	offline(t)
	key, pub := keyPair(t)
	otherKey, _ := keyPair(t)
	t.Setenv("RELEASE_TEST_KEY", readFile(t, key))
	changelog := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte(testChanges), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    signer
		want string // in the error; empty: no error
	}{
		{"no key", signer{pub: pub}, "set COSIGN_KEY"},
		{"no cosign.pub", signer{key: key, password: testPassword, pub: filepath.Join(t.TempDir(), "cosign.pub")},
			"the release key's public half must be committed as cosign.pub before the first release: docs/developing.md"},
		{"a public key that is none", signer{key: key, password: testPassword, pub: changelog}, "no PEM \"PUBLIC KEY\" block"},
		{"another key", signer{key: otherKey, password: testPassword, pub: pub}, "COSIGN_KEY is not the private half of " + pub},
		{"the wrong password", signer{key: key, password: "wrong", pub: pub}, "is COSIGN_PASSWORD its password?"},
		{"the key, from a file", signer{key: key, password: testPassword, pub: pub}, ""},
		{"the key, from the environment", signer{key: "env://RELEASE_TEST_KEY", password: testPassword, pub: pub}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.cosign = testenv.Cosign()
			if tc.want == "" {
				if err := tc.s.check(); err != nil {
					t.Fatalf("the release key is refused: %v", err)
				}
				return
			}
			built := false
			r := &release{root: testenv.RepoRoot(), dir: filepath.Join(t.TempDir(), "release"), version: testVersion, commit: testCommit,
				created: testEpoch, changelog: changelog, signer: &tc.s,
				compile: func(string, string, string, string, ...string) error { built = true; return nil }}
			err := r.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("release: %v, want an error saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Errorf("the error shows the key's password: %v", err)
			}
			if _, statErr := os.Stat(r.dir); built || statErr == nil {
				t.Errorf("it built before refusing (compiled: %v, %s exists: %v)", built, r.dir, statErr == nil)
			}
		})
	}
}
