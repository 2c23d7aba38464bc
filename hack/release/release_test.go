//go:build !unit

package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-dev/switchboard/internal/local/image"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

const (
	testVersion = "v0.1.0"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	testChanges = `# Changelog

## [Unreleased]

### Added
- Not released yet.

## [0.1.0] - 2026-11-27

### Added
- The first release.

### Fixed
- A fix written
  over two lines.
`
)

// testEpoch is the tests' SOURCE_DATE_EPOCH.
var testEpoch = time.Unix(1767225600, 0).UTC()

// TestRelease cuts a release twice from this working tree, signed with a throwaway key pair,
// once pushing to an in-process OCI registry on loopback, and inspects what it made: the
// archives and their checksums, the image index and its annotations, the SBOM attached to it,
// the chart pulled back with helm, the krew manifest, the signatures (cosign verify), and that
// the second build gives the same bytes.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles 9 binaries twice")
	}
	helm, validateKrew := releaseTools(t)
	t.Setenv("TUF_ROOT", t.TempDir())
	key, pub := keyPair(t)
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	reg := strings.TrimPrefix(srv.URL, "http://")

	changelog := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte(testChanges), 0o600); err != nil {
		t.Fatal(err)
	}
	cut := func(dir, registry string) *release {
		t.Helper()
		var out bytes.Buffer
		r := &release{root: testenv.RepoRoot(), dir: dir, version: testVersion, commit: testCommit, created: testEpoch,
			changelog: changelog, registry: registry, imageRepo: reg + "/switchboard", helm: helm,
			krewBaseURL: "https://example.test/releases/" + testVersion, validateKrew: validateKrew, caCerts: "", out: &out,
			signer: &signer{cosign: testenv.Cosign(), key: key, password: testPassword, pub: pub}}
		start := time.Now()
		err := r.run()
		t.Logf("release into %s in %s:\n%s", dir, time.Since(start).Round(time.Second), out.String())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first, second := t.TempDir(), t.TempDir()
	r := cut(first, reg)
	cut(second, "")

	t.Run("checksums", func(t *testing.T) { checkChecksums(t, first) })
	t.Run("archives", func(t *testing.T) { checkArchives(t, first) })
	t.Run("reproducible", func(t *testing.T) { checkSame(t, first, second) })
	idxDigest := ""
	t.Run("image", func(t *testing.T) { idxDigest = checkImage(t, first) })
	t.Run("registry", func(t *testing.T) {
		mods := checkRegistry(t, reg, idxDigest)
		if !strings.Contains(mods["sigs.k8s.io/controller-runtime"], "image linux/arm64") ||
			!strings.Contains(mods["github.com/spf13/cobra"], "kubectl-switchboard windows/amd64") {
			t.Errorf("the SBOM misses modules the binaries link: %v", mods)
		}
	})
	t.Run("chart", func(t *testing.T) { checkChart(t, r, reg) })
	t.Run("krew", func(t *testing.T) { checkKrew(t, first) })
	t.Run("signatures", func(t *testing.T) {
		start := time.Now()
		checkSignatures(t, pub, first, reg+"/switchboard:"+testVersion, reg+"/charts/switchboard:0.1.0")
		verifyBlob(t, pub, second)
		t.Logf("verified in %s", time.Since(start).Round(time.Millisecond))
	})
	t.Run("notes", func(t *testing.T) { checkNotes(t, first) })
}

// checkNotes reads notes.md: the changelog's section, and how to verify the signatures.
func checkNotes(t testing.TB, dir string) {
	b := readFile(t, filepath.Join(dir, "notes.md"))
	if !strings.Contains(b, "- The first release.") || strings.Contains(b, "Not released yet") {
		t.Errorf("notes.md is not the changelog's 0.1.0 section:\n%s", b)
	}
	if want := "curl -fsSLO https://raw.githubusercontent.com/switchboard-dev/switchboard/refs/tags/v0.1.0/cosign.pub"; !strings.Contains(b, want) ||
		strings.Contains(b, "in this release") {
		t.Errorf("notes.md does not take the release key from the tagged repository (%q):\n%s", want, b)
	}
	for _, want := range []string{"cosign verify --key cosign.pub --insecure-ignore-tlog ",
		"cosign verify-blob --key cosign.pub --insecure-ignore-tlog --signature checksums.txt.sig checksums.txt"} {
		if !strings.Contains(b, want) || strings.Contains(b, "not signed") {
			t.Errorf("notes.md does not say how to verify the signatures (%q):\n%s", want, b)
		}
	}
}

// wantArchives are the archives a release has.
var wantArchives = []string{
	"kubectl-switchboard_v0.1.0_darwin_amd64.tar.gz", "kubectl-switchboard_v0.1.0_darwin_arm64.tar.gz",
	"kubectl-switchboard_v0.1.0_linux_amd64.tar.gz", "kubectl-switchboard_v0.1.0_linux_arm64.tar.gz",
	"kubectl-switchboard_v0.1.0_windows_amd64.zip",
	"switchboard_v0.1.0_linux_amd64.tar.gz", "switchboard_v0.1.0_linux_arm64.tar.gz",
}

func readFile(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Clean(file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sums parses checksums.txt: file → SHA-256.
func sums(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(readFile(t, filepath.Join(dir, "checksums.txt"))), "\n") {
		sum, file, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("checksums.txt: %q is not sha256sum's format", line)
		}
		m[file] = sum
	}
	return m
}

func checkChecksums(t testing.TB, dir string) {
	got := sums(t, dir)
	want := append(slices.Clone(wantArchives), "switchboard-0.1.0.tgz", "switchboard_v0.1.0_sbom.cdx.json")
	files := make([]string, 0, len(got))
	for f, sum := range got {
		files = append(files, f)
		s, err := fileSHA256(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if s != sum {
			t.Errorf("checksums.txt says %s of %s, it is %s", sum, f, s)
		}
	}
	sort.Strings(files)
	sort.Strings(want)
	if !slices.Equal(files, want) {
		t.Errorf("checksums.txt lists %v, want %v", files, want)
	}
}

// checkArchives opens every archive: the binary, LICENSE and README.md, stamped with the epoch.
func checkArchives(t testing.TB, dir string) {
	license := readFile(t, filepath.Join(testenv.RepoRoot(), "LICENSE"))
	for _, a := range wantArchives {
		bin := strings.SplitN(a, "_", 2)[0]
		files := map[string]string{}
		if strings.HasSuffix(a, ".zip") {
			bin += ".exe"
			zr, err := zip.OpenReader(filepath.Join(dir, a))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range zr.File {
				if !f.Modified.Equal(testEpoch) {
					t.Errorf("%s: %s's time is %s, want SOURCE_DATE_EPOCH %s", a, f.Name, f.Modified, testEpoch)
				}
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(rc)
				_ = rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				files[f.Name] = string(b)
			}
			_ = zr.Close()
		} else {
			zr, err := gzip.NewReader(strings.NewReader(readFile(t, filepath.Join(dir, a))))
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(zr)
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if !h.ModTime.Equal(testEpoch) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" {
					t.Errorf("%s: %s is stamped %s %d:%d %q, want SOURCE_DATE_EPOCH %s, 0:0, no names", a, h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, testEpoch)
				}
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				files[h.Name] = string(b)
			}
		}
		if files["LICENSE"] != license {
			t.Errorf("%s does not carry LICENSE", a)
		}
		if files["README.md"] == "" {
			t.Errorf("%s does not carry README.md", a)
		}
		if !strings.Contains(files[bin], testVersion) {
			t.Errorf("%s: %s is missing or does not carry the version %s", a, bin, testVersion)
		}
	}
}

// checkSame compares two releases of the same commit: the same checksums, the same index.
func checkSame(t testing.TB, a, b string) {
	if sa, sb := readFile(t, filepath.Join(a, "checksums.txt")), readFile(t, filepath.Join(b, "checksums.txt")); sa != sb {
		t.Errorf("two releases of one commit differ:\n%s\n%s", sa, sb)
	}
	if ia, ib := readFile(t, filepath.Join(a, "image", "index.json")), readFile(t, filepath.Join(b, "image", "index.json")); ia != ib {
		t.Errorf("two releases of one commit have different image indexes:\n%s\n%s", ia, ib)
	}
}

// readLayout opens the release's OCI layout in dir/image: the layout, its top index (index.json)
// and that index's manifest.
func readLayout(t testing.TB, dir string) (layout.Path, v1.ImageIndex, *v1.IndexManifest) {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(dir, "image"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return p, top, m
}

// checkImage reads the OCI layout: an index for linux/amd64 and linux/arm64 with the
// release's annotations, images labelled alike, and the SBOM artifact referring to it. It
// returns the index's digest.
func checkImage(t testing.TB, dir string) string {
	p, top, tm := readLayout(t, dir)
	var idxDesc, sbomDesc *v1.Descriptor
	for i, d := range tm.Manifests {
		switch {
		case d.Annotations[image.AnnotationRefName] == testVersion:
			idxDesc = &tm.Manifests[i]
		case d.ArtifactType == SBOMMediaType:
			sbomDesc = &tm.Manifests[i]
		}
	}
	if idxDesc == nil || sbomDesc == nil {
		t.Fatalf("the layout's index.json has no index tagged %s or no SBOM: %+v", testVersion, tm.Manifests)
	}
	idx, err := top.ImageIndex(idxDesc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testCommit,
		"org.opencontainers.image.source":   "https://github.com/switchboard-dev/switchboard",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  "2026-01-01T00:00:00Z",
	}
	for k, v := range want {
		if im.Annotations[k] != v {
			t.Errorf("the index's annotation %s is %q, want %q", k, im.Annotations[k], v)
		}
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Platform().String() != d.Platform.String() {
			t.Errorf("the index says %s of an image for %s", d.Platform, cf.Platform())
		}
		for k, v := range want {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s's label %s is %q, want %q", d.Platform, k, cf.Config.Labels[k], v)
			}
		}
	}
	if sort.Strings(platforms); !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("the index is for %v, want linux/amd64 and linux/arm64", platforms)
	}
	b, err := p.Bytes(sbomDesc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Subject == nil || m.Subject.Digest != idxDesc.Digest {
		t.Errorf("the SBOM's subject is %v, want the index %s", m.Subject, idxDesc.Digest)
	}
	return idxDesc.Digest.String()
}

// checkRegistry reads the pushed index and finds the SBOM among its referrers.
// It returns the SBOM's modules: path → the binaries linking it.
func checkRegistry(t testing.TB, reg, digest string) map[string]string {
	if digest == "" {
		t.Fatal("no index")
	}
	ref, err := name.NewTag(reg+"/switchboard:"+testVersion, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != digest {
		t.Errorf("the registry's %s is %s, the layout's %s", ref, desc.Digest, digest)
	}
	refs, err := remote.Referrers(ref.Context().Digest(digest))
	if err != nil {
		t.Fatal(err)
	}
	rm, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Manifests) != 1 {
		t.Fatalf("the index has %d referrers, want the SBOM: %+v", len(rm.Manifests), rm.Manifests)
	}
	raw, err := remote.Get(ref.Context().Digest(rm.Manifests[0].Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != SBOMMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != SBOMMediaType {
		t.Fatalf("the referrer is no CycloneDX SBOM: %s", raw.Manifest)
	}
	l, err := remote.Layer(ref.Context().Digest(m.Layers[0].Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	var bom cdxBOM
	if err := json.NewDecoder(rc).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	binaries := map[string]bool{}
	for _, c := range bom.Components {
		for _, p := range c.Properties {
			switch p.Name {
			case "linked-into":
				found[c.Name] = p.Value
			case "platform":
				if len(c.Hashes) == 1 && c.Hashes[0].Alg == "SHA-256" && len(c.Hashes[0].Content) == 64 {
					binaries[c.Name+" "+p.Value] = true
				}
			}
		}
	}
	// Every binary of the release, with its SHA-256.
	var want []string
	for _, arch := range []string{"amd64", "arm64"} {
		want = append(want, "switchboard linux/"+arch, "image linux/"+arch)
	}
	for _, p := range pluginPlatforms {
		want = append(want, "kubectl-switchboard "+p[0]+"/"+p[1])
	}
	for _, w := range want {
		if !binaries[w] {
			t.Errorf("the SBOM does not describe %s", w)
		}
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Version != testVersion {
		t.Errorf("the SBOM is no CycloneDX document of %s: %+v", testVersion, bom.Metadata)
	}
	return found
}

// checkChart pulls the chart back with helm and reads its Chart.yaml.
func checkChart(t testing.TB, r *release, reg string) {
	dir := t.TempDir()
	if b, err := exec.Command(r.helm, "pull", "oci://"+reg+"/charts/switchboard", "--version", "0.1.0", //nolint:gosec // the test's helm
		"--plain-http", "--destination", dir).CombinedOutput(); err != nil {
		t.Fatalf("helm pull: %v: %s", err, b)
	}
	b, err := exec.Command(r.helm, "show", "chart", filepath.Join(dir, "switchboard-0.1.0.tgz")).Output() //nolint:gosec // the test's helm
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version     string            `json:"version"`
		AppVersion  string            `json:"appVersion"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != "0.1.0" || chart.AppVersion != testVersion {
		t.Errorf("the chart is version %q, appVersion %q; want 0.1.0, %s", chart.Version, chart.AppVersion, testVersion)
	}
	var cs []change
	if err := yaml.Unmarshal([]byte(chart.Annotations["artifacthub.io/changes"]), &cs); err != nil {
		t.Fatal(err)
	}
	want := []change{{Kind: "added", Description: "The first release."}, {Kind: "fixed", Description: "A fix written over two lines."}}
	if !slices.Equal(cs, want) {
		t.Errorf("artifacthub.io/changes is %+v, want %+v", cs, want)
	}
	if chart.Annotations["artifacthub.io/license"] != "Apache-2.0" ||
		!strings.Contains(chart.Annotations["artifacthub.io/images"], reg+"/switchboard:"+testVersion) {
		t.Errorf("the chart's Artifact Hub annotations: %v", chart.Annotations)
	}
	out, err := exec.Command(r.helm, "template", "sb", filepath.Join(dir, "switchboard-0.1.0.tgz")).Output() //nolint:gosec // the test's helm
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "image: "+reg+"/switchboard:"+testVersion) {
		t.Errorf("the chart does not run the release's image %s", reg+"/switchboard:"+testVersion)
	}
}

// checkKrew reads the krew manifest: one platform per plugin archive, with its checksum.
func checkKrew(t testing.TB, dir string) {
	var p krewPlugin
	if err := yaml.UnmarshalStrict([]byte(readFile(t, filepath.Join(dir, "switchboard.yaml"))), &p); err != nil {
		t.Fatal(err)
	}
	s := sums(t, dir)
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Spec.Version != testVersion || len(p.Spec.Platforms) != 5 {
		t.Fatalf("the krew manifest: %+v", p)
	}
	for _, pl := range p.Spec.Platforms {
		file := strings.TrimPrefix(pl.URI, "https://example.test/releases/"+testVersion+"/")
		if s[file] == "" || s[file] != pl.SHA256 {
			t.Errorf("krew's %s: %s with sha256 %s, checksums.txt says %q", pl.Selector.MatchLabels, pl.URI, pl.SHA256, s[file])
		}
	}
}

// TestKrewManifestValidates checks a krew manifest of this package with krew's own checker,
// and that the checker refuses one whose platforms overlap.
func TestKrewManifestValidates(t *testing.T) {
	validateKrew := testenv.ValidateKrewManifest()
	var archives []pluginArchive
	for _, p := range pluginPlatforms {
		archives = append(archives, pluginArchive{goos: p[0], goarch: p[1], file: "kubectl-switchboard_" + p[0] + "_" + p[1] + ".tar.gz",
			sha256: strings.Repeat("ab", 32)})
	}
	for _, tc := range []struct {
		name     string
		archives []pluginArchive
		ok       bool
	}{
		{"every platform once", archives, true},
		{"linux/amd64 twice", append(slices.Clone(archives), archives[0]), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := krewManifest(testVersion, "https://example.test/", tc.archives)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "switchboard.yaml")
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(validateKrew, "-manifest", file, "-skip-install").CombinedOutput() //nolint:gosec // the test's checker
			if (err == nil) != tc.ok {
				t.Errorf("validate-krew-manifest: %v, want ok %v:\n%s\n%s", err, tc.ok, out, b)
			}
		})
	}
}

// releaseTools is what a release runs besides Go: helm (testenv.Helm), with configuration,
// cache and data directories of the test's own, and krew's manifest checker.
func releaseTools(t *testing.T) (helm, validateKrew string) {
	t.Helper()
	for _, env := range []string{"HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"} {
		t.Setenv(env, t.TempDir())
	}
	return testenv.Helm(t), testenv.ValidateKrewManifest()
}
