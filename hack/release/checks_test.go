//go:build !unit

package main

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// recorder is a testing.TB that notes a failure instead of failing the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()           {}
func (r *recorder) Error(args ...any) { r.failed = true; r.Log(args...) }
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.Logf(format, args...)
}
func (r *recorder) Fatal(args ...any) { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Skip(...any) { runtime.Goexit() }

// fails runs check and says whether it failed.
func fails(t *testing.T, check func(testing.TB)) bool {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	<-done
	return rec.failed
}

// TestChecksCatchBrokenParts shows that each check of TestRelease fails when the part it
// checks is broken. Its releases are made of one small Go binary standing in for every
// compiled one (no cross-compiling), so that it runs in seconds; TestRelease builds the real ones.
func TestChecksCatchBrokenParts(t *testing.T) {
	helm, validateKrew := releaseTools(t)
	offline(t)
	key, pub := keyPair(t)
	_, otherPub := keyPair(t)
	newRegistry := func() string {
		srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	changelog := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte(testChanges), 0o600); err != nil {
		t.Fatal(err)
	}
	// A small Go binary (it has build information for the SBOM), with the version appended
	// as the real ones carry it.
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	stand, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(goroot)), "bin", "gofmt"))
	if err != nil {
		t.Fatal(err)
	}
	stand = append(stand, []byte(testVersion)...)
	compile := func(out, _, _, _ string, _ ...string) error {
		if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
			return err
		}
		return os.WriteFile(out, stand, 0o600)
	}
	cut := func(reg string, edit func(*release)) *release {
		t.Helper()
		r := &release{root: testenv.RepoRoot(), dir: t.TempDir(), version: testVersion, commit: testCommit, created: testEpoch,
			changelog: changelog, registry: reg, imageRepo: reg + "/switchboard", helm: helm,
			krewBaseURL: "https://example.test/releases/" + testVersion, validateKrew: validateKrew,
			out: io.Discard, compile: compile, signer: &signer{cosign: testenv.Cosign(), key: key, password: testPassword, pub: pub}}
		if edit != nil {
			edit(r)
		}
		if err := r.run(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	copyOf := func(dir string) string {
		t.Helper()
		c := filepath.Join(t.TempDir(), "copy")
		if err := os.CopyFS(c, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		return c
	}

	reg := newRegistry()
	good := cut(reg, nil)
	// Releases beside it, not pushed.
	noPush := func(edit func(*release)) *release {
		return cut(reg, func(r *release) {
			r.registry = ""
			if edit != nil {
				edit(r)
			}
		})
	}
	digest := ""
	imageTag, chartTag := reg+"/switchboard:"+testVersion, reg+"/charts/switchboard:0.1.0"
	checks := map[string]func(testing.TB){
		"checksums":    func(t testing.TB) { checkChecksums(t, good.dir) },
		"archives":     func(t testing.TB) { checkArchives(t, good.dir) },
		"reproducible": func(t testing.TB) { checkSame(t, good.dir, noPush(nil).dir) },
		"image":        func(t testing.TB) { digest = checkImage(t, good.dir) },
		"krew":         func(t testing.TB) { checkKrew(t, good.dir) },
		"chart":        func(t testing.TB) { checkChart(t, good, reg) },
		"signatures":   func(t testing.TB) { checkSignatures(t, pub, good.dir, imageTag, chartTag) },
		"notes":        func(t testing.TB) { checkNotes(t, good.dir) },
	}
	for _, n := range []string{"checksums", "archives", "reproducible", "image", "krew", "chart", "signatures", "notes"} {
		if fails(t, checks[n]) {
			t.Fatalf("check %s fails on a good release", n)
		}
	}
	if fails(t, func(t testing.TB) { checkRegistry(t, reg, digest) }) {
		t.Fatal("check registry fails on a good release")
	}

	for _, tc := range []struct {
		name  string
		check func(testing.TB)
	}{
		{"checksums: an archive changed after", func(t testing.TB) {
			dir := copyOf(good.dir)
			f, err := os.OpenFile(filepath.Join(dir, wantArchives[0]), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteString("x")
			_ = f.Close()
			checkChecksums(t, dir)
		}},
		{"archives: one without LICENSE", func(t testing.TB) {
			dir := copyOf(good.dir)
			b, err := tarGz([]member{{name: "README.md", mode: 0o644, data: []byte("readme")},
				{name: "switchboard", mode: 0o755, data: stand}}, testEpoch)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "switchboard_v0.1.0_linux_amd64.tar.gz"), b, 0o600); err != nil {
				t.Fatal(err)
			}
			checkArchives(t, dir)
		}},
		{"reproducible: another time stamp", func(t testing.TB) {
			checkSame(t, good.dir, noPush(func(r *release) { r.created = testEpoch.Add(1e9) }).dir)
		}},
		{"image: one platform", func(t testing.TB) {
			defer func(a []string) { linuxArches = a }(linuxArches)
			linuxArches = []string{"amd64"}
			checkImage(t, noPush(nil).dir)
		}},
		{"image: another revision", func(t testing.TB) {
			checkImage(t, noPush(func(r *release) { r.commit = strings.Repeat("f", 40) }).dir)
		}},
		{"image: the SBOM refers to nothing", func(t testing.TB) {
			dir := copyOf(good.dir)
			p, _, m := readLayout(t, dir)
			for _, d := range m.Manifests {
				if d.ArtifactType == SBOMMediaType {
					mf, err := p.Bytes(d.Digest)
					if err != nil {
						t.Fatal(err)
					}
					mf = bytes.Replace(mf, []byte(`"subject"`), []byte(`"subjekt"`), 1)
					if err := os.WriteFile(filepath.Join(dir, "image", "blobs", "sha256", d.Digest.Hex), mf, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkImage(t, dir)
		}},
		{"registry: the index without its SBOM", func(t testing.TB) {
			other := newRegistry()
			_, top, _ := readLayout(t, good.dir)
			h, err := v1.NewHash(digest)
			if err != nil {
				t.Fatal(err)
			}
			idx, err := top.ImageIndex(h)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := name.NewTag(other+"/switchboard:"+testVersion, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.WriteIndex(ref, idx); err != nil {
				t.Fatal(err)
			}
			checkRegistry(t, other, digest)
		}},
		{"chart: no changes annotation", func(t testing.TB) {
			other := newRegistry()
			r := *good
			r.dir, r.registry, r.imageRepo = t.TempDir(), other, other+"/switchboard"
			pkg, err := packageChart(&r, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pushChart(&r, pkg); err != nil {
				t.Fatal(err)
			}
			checkChart(t, &r, other)
		}},
		{"signatures: checksums.txt with another key", func(t testing.TB) {
			dir := copyOf(good.dir) // carrying the other cosign.pub, so that only the signature can fail
			if err := os.WriteFile(filepath.Join(dir, pubFile), []byte(readFile(t, otherPub)), 0o600); err != nil {
				t.Fatal(err)
			}
			verifyBlob(t, otherPub, dir)
		}},
		{"signatures: the image index with another key", func(t testing.TB) { verifyImage(t, otherPub, imageTag) }},
		{"signatures: the chart with another key", func(t testing.TB) { verifyImage(t, otherPub, chartTag) }},
		{"signatures: checksums.txt changed after", func(t testing.TB) {
			dir := copyOf(good.dir)
			file := filepath.Join(dir, "checksums.txt")
			if err := os.WriteFile(file, []byte(strings.Replace(readFile(t, file), "  ", "  ./", 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			verifyBlob(t, pub, dir)
		}},
		{"signatures: an image index no one signed", func(t testing.TB) { verifyImage(t, pub, pushAltered(t, imageTag)) }},
		{"signatures: a chart no one signed", func(t testing.TB) { verifyImage(t, pub, pushAltered(t, chartTag)) }},
		{"signatures: an unsigned release (SIGN=false)", func(t testing.TB) {
			checkSignatures(t, pub, noPush(func(r *release) { r.signer = nil }).dir)
		}},
		{"notes: an unsigned release (SIGN=false)", func(t testing.TB) {
			checkNotes(t, noPush(func(r *release) { r.signer = nil }).dir)
		}},
		{"krew: a wrong checksum", func(t testing.TB) {
			dir := copyOf(good.dir)
			file := filepath.Join(dir, "switchboard.yaml")
			b := readFile(t, file)
			s := sums(t, dir)
			b = strings.Replace(b, s[wantArchives[0]], strings.Repeat("0", 64), 1)
			if err := os.WriteFile(file, []byte(b), 0o600); err != nil {
				t.Fatal(err)
			}
			checkKrew(t, dir)
		}},
	} {
		if !fails(t, tc.check) {
			t.Errorf("%s: the check passes", tc.name)
		}
	}
}
