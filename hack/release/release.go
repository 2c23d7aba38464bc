package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/partial"

	"github.com/switchboard-dev/switchboard/internal/local/image"
)

// linuxArches are the architectures of switchboard's binaries and of its image index.
var linuxArches = []string{"amd64", "arm64"}

// pluginPlatforms are the GOOS/GOARCH the kubectl plugin is released for.
var pluginPlatforms = [][2]string{
	{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"},
}

// release is one `make release`: what it is built from and where it goes.
type release struct {
	// root is the repository's working tree; the binaries, chart, LICENSE and README come from it.
	root string
	// dir is where the artifacts are written (RELEASE_DIR).
	dir string
	// version is vX.Y.Z.
	version string
	// commit is the git revision released (org.opencontainers.image.revision).
	commit string
	// created is SOURCE_DATE_EPOCH: every time stamp in the artifacts.
	created time.Time
	// changelog is CHANGELOG.md's path, which must have a section for version.
	changelog string
	// registry (host[:port][/path]) receives the image, its SBOM and the chart; empty: none.
	registry string
	// imageRepo is the image's repository the chart and annotations name.
	imageRepo string
	// helm is the helm binary that packages and pushes the chart.
	helm string
	// krewBaseURL is where the krew manifest says the plugin's archives are downloaded from.
	krewBaseURL string
	// validateKrew is krew's validate-krew-manifest, which checks the krew manifest.
	validateKrew string
	// caCerts is the CA bundle the image carries, as `make image`'s.
	caCerts string
	// signer signs checksums.txt, and the image index and the chart when pushed; nil: the
	// release is not signed (SIGN=false), and its notes say so.
	signer *signer
	// out receives the progress lines.
	out io.Writer
	// compile builds a binary (goBuild unless a test puts something faster in its place).
	compile func(out, goos, goarch, pkg string, extra ...string) error
}

// imageRef is the image's tag reference.
func (r *release) imageRef() string { return r.imageRepo + ":" + r.version }

// imageAnnotations are the OCI annotations of the index, also its images' labels.
func (r *release) imageAnnotations() map[string]string {
	return map[string]string{
		image.LabelTitle:    "switchboard",
		image.LabelVersion:  r.version,
		image.LabelSource:   image.Source,
		image.LabelRevision: r.commit,
		image.LabelLicenses: image.License,
		annotationCreated:   r.created.UTC().Format(time.RFC3339),
	}
}

// run builds every artifact into r.dir, pushing to r.registry when set.
func (r *release) run() error {
	if err := checkVersion(r.version); err != nil {
		return err
	}
	cl, err := os.ReadFile(filepath.Clean(r.changelog))
	if err != nil {
		return err
	}
	section, err := changelogSection(string(cl), r.version)
	if err != nil {
		return err
	}
	changes, err := changesAnnotation(section)
	if err != nil {
		return err
	}
	// Refuse a key that is missing or is not cosign.pub's before building anything.
	if r.signer != nil {
		start := time.Now()
		if err := r.signer.check(); err != nil {
			return err
		}
		fmt.Fprintf(r.out, "release: COSIGN_KEY is the private half of %s (checked in %s)\n", r.signer.pub, time.Since(start).Round(time.Millisecond))
	}
	if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return err
	}
	if r.compile == nil {
		r.compile = r.goBuild
	}
	build, err := os.MkdirTemp("", "switchboard-release-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(build) }()

	var artifacts []string
	sbomBins := map[string]string{}
	// switchboard: the binary users run themselves keeps `switchboard dev`; the image's is
	// built -tags nodev, as `make image` and the Dockerfile build it.
	for _, arch := range linuxArches {
		bin := filepath.Join(build, "switchboard-linux-"+arch)
		if err := r.compile(bin, "linux", arch, "./cmd/switchboard"); err != nil {
			return err
		}
		sbomBins["switchboard linux/"+arch] = bin
		a, err := r.archive("switchboard", "linux", arch, bin)
		if err != nil {
			return err
		}
		artifacts = append(artifacts, a)
	}
	var plugins []pluginArchive
	for _, p := range pluginPlatforms {
		bin := filepath.Join(build, "kubectl-switchboard-"+p[0]+"-"+p[1])
		if err := r.compile(bin, p[0], p[1], "./cmd/kubectl-switchboard"); err != nil {
			return err
		}
		sbomBins["kubectl-switchboard "+p[0]+"/"+p[1]] = bin
		a, err := r.archive("kubectl-switchboard", p[0], p[1], bin)
		if err != nil {
			return err
		}
		sum, err := fileSHA256(filepath.Join(r.dir, a))
		if err != nil {
			return err
		}
		artifacts = append(artifacts, a)
		plugins = append(plugins, pluginArchive{goos: p[0], goarch: p[1], file: a, sha256: sum})
	}
	imageBins := map[string]string{}
	for _, arch := range linuxArches {
		bin := filepath.Join(build, "image", arch, "switchboard")
		if err := r.compile(bin, "linux", arch, "./cmd/switchboard", "-tags", "nodev"); err != nil {
			return err
		}
		imageBins[arch] = bin
		sbomBins["image linux/"+arch] = bin
	}

	doc, err := sbom(r.version, r.created, sbomBins)
	if err != nil {
		return err
	}
	sbomFile := "switchboard_" + r.version + "_sbom.cdx.json"
	if err := os.WriteFile(filepath.Join(r.dir, sbomFile), doc, 0o600); err != nil {
		return err
	}
	artifacts = append(artifacts, sbomFile)

	idx, err := imageIndex(r, imageBins)
	if err != nil {
		return err
	}
	idxDesc, err := partial.Descriptor(idx)
	if err != nil {
		return err
	}
	sbomMf, sbomBlobs, err := sbomManifest(*idxDesc, doc, r.created.UTC().Format(time.RFC3339))
	if err != nil {
		return err
	}
	layoutDir := filepath.Join(r.dir, "image")
	if err := os.RemoveAll(layoutDir); err != nil {
		return err
	}
	if err := writeLayout(layoutDir, r.version, idx, sbomMf, sbomBlobs); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "release: image index %s@%s (OCI layout in %s)\n", r.imageRef(), idxDesc.Digest, layoutDir)

	chart, err := packageChart(r, changes)
	if err != nil {
		return err
	}
	artifacts = append(artifacts, chart)

	sums, err := checksums(r.dir, artifacts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "checksums.txt"), []byte(sums), 0o600); err != nil {
		return err
	}
	if err := r.signChecksums(); err != nil {
		return err
	}
	krew, err := krewManifest(r.version, r.krewBaseURL, plugins)
	if err != nil {
		return err
	}
	krewFile := filepath.Join(r.dir, "switchboard.yaml")
	if err := os.WriteFile(krewFile, krew, 0o600); err != nil {
		return err
	}
	// -skip-install: installing each platform downloads its archive from where the release
	// is not uploaded yet.
	if b, err := exec.Command(r.validateKrew, "-manifest", krewFile, "-skip-install").CombinedOutput(); err != nil { //nolint:gosec // the checker the Makefile names
		return fmt.Errorf("validate-krew-manifest %s: %w: %s", krewFile, err, b)
	}

	chartDigest := ""
	if r.registry != "" {
		if err := push(r.registry, r.version, idx, sbomMf, sbomBlobs); err != nil {
			return err
		}
		if chartDigest, err = pushChart(r, chart); err != nil {
			return err
		}
		fmt.Fprintf(r.out, "release: pushed %s@%s, its SBOM, and oci://%s@%s\n",
			r.imageRef(), idxDesc.Digest, r.chartRef(), chartDigest)
		if r.signer != nil {
			plainHTTP := len(nameOptions(r.registry)) > 0
			// Where push put the index (the image's repository may name where it is copied to).
			for _, ref := range []string{r.registry + "/switchboard@" + idxDesc.Digest.String(), r.chartRef() + "@" + chartDigest} {
				start := time.Now()
				if err := r.signer.signImage(ref, plainHTTP); err != nil {
					return fmt.Errorf("signing %s: %w", ref, err)
				}
				fmt.Fprintf(r.out, "release: signed %s in %s\n", ref, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	if err := os.WriteFile(filepath.Join(r.dir, "notes.md"), []byte(notes(r, section, idxDesc.Digest.String(), chartDigest)), 0o600); err != nil {
		return err
	}
	switch {
	case r.signer == nil:
		fmt.Fprintf(r.out, "release: %s in %s\nrelease: WARNING: NOT SIGNED (SIGN=false): this release is a dry run, not one to publish; notes.md says so\n", r.version, r.dir)
	case r.registry == "":
		fmt.Fprintf(r.out, "release: %s in %s; only checksums.txt is signed: without a registry the image index and the chart are neither pushed nor signed\n", r.version, r.dir)
	default:
		fmt.Fprintf(r.out, "release: %s in %s, signed: checksums.txt (%s), the image index and the chart (in the registry, beside them)\n", r.version, r.dir, checksumsSigFile)
	}
	return nil
}

// signChecksums signs checksums.txt into checksums.txt.sig and copies the public key beside it.
func (r *release) signChecksums() error {
	if r.signer == nil {
		return nil
	}
	start := time.Now()
	if err := r.signer.signBlob(filepath.Join(r.dir, "checksums.txt"), filepath.Join(r.dir, checksumsSigFile)); err != nil {
		return fmt.Errorf("signing checksums.txt: %w", err)
	}
	pub, err := os.ReadFile(filepath.Clean(r.signer.pub))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, pubFile), pub, 0o600); err != nil { //nolint:gosec // a public key
		return err
	}
	fmt.Fprintf(r.out, "release: signed checksums.txt into %s in %s\n", checksumsSigFile, time.Since(start).Round(time.Millisecond))
	return nil
}

// chartRef is the chart's OCI repository, without a tag.
func (r *release) chartRef() string { return chartRegistry(r) + "/charts/switchboard" }

// notes are the release notes: the changelog's section, how to install, and how to verify
// the signatures (or that there are none). chartDigest is empty when the chart was not pushed.
func notes(r *release, section, digest, chartDigest string) string {
	v := strings.TrimPrefix(r.version, "v")
	var b strings.Builder
	if r.signer == nil {
		b.WriteString("> **This release is not signed** (`make release SIGN=false`): a dry run, not one to publish.\n\n")
	}
	b.WriteString("# switchboard " + r.version + "\n\n" + section + "\n\n## Install\n\n" +
		"```sh\nhelm install switchboard oci://" + r.chartRef() + " --version " + v +
		" --namespace switchboard --create-namespace\n```\n\n" +
		"The image is `" + r.imageRepo + "@" + digest + "` (linux/amd64, linux/arm64), with its CycloneDX SBOM attached. ")
	if chartDigest != "" {
		b.WriteString("The chart is `oci://" + r.chartRef() + "@" + chartDigest + "`. ")
	}
	b.WriteString("`checksums.txt` lists the SHA-256 of every archive.\n")
	if r.signer == nil {
		return b.String()
	}
	b.WriteString("\n## Verify\n\n" +
		"The image index, the chart and `checksums.txt` are signed with cosign by the release key (no transparency log: hence " +
		"`--insecure-ignore-tlog`). Take its public half from the repository at this release's tag, never from the release " +
		"itself: whoever could replace the release's files could replace a key shipped beside them.\n\n```sh\n" +
		"curl -fsSLO " + pubKeyURL(r.version) + "\n")
	if chartDigest != "" {
		b.WriteString("cosign verify --key cosign.pub --insecure-ignore-tlog " + r.imageRepo + "@" + digest + "\n" +
			"cosign verify --key cosign.pub --insecure-ignore-tlog " + r.chartRef() + "@" + chartDigest + "\n")
	}
	b.WriteString("cosign verify-blob --key cosign.pub --insecure-ignore-tlog --signature checksums.txt.sig checksums.txt\n" +
		"sha256sum --check --ignore-missing checksums.txt\n```\n")
	return b.String()
}

// pubKeyURL is the release key's public half in the repository at version's tag: the anchor a
// release's notes point at, which replacing the release does not replace.
func pubKeyURL(version string) string {
	return "https://raw.githubusercontent.com/switchboard-dev/switchboard/refs/tags/" + version + "/cosign.pub"
}

// chartRegistry is where the notes say the chart is: the release's registry, else the image's.
func chartRegistry(r *release) string {
	if r.registry != "" {
		return r.registry
	}
	return strings.TrimSuffix(r.imageRepo, "/switchboard")
}

// goBuild cross-compiles pkg into out, reproducibly: no cgo, -trimpath, no VCS stamp, the
// version and commit in internal/version, as the Makefile's LDFLAGS set them.
func (r *release) goBuild(out, goos, goarch, pkg string, extra ...string) error {
	args := append([]string{"build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X github.com/switchboard-dev/switchboard/internal/version.Version=" + r.version +
			" -X github.com/switchboard-dev/switchboard/internal/version.Commit=" + r.commit,
		"-o", out}, extra...)
	cmd := exec.Command("go", append(args, pkg)...) //nolint:gosec // fixed arguments
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w: %s", pkg, goos, goarch, err, b)
	}
	fmt.Fprintf(r.out, "release: built %s for %s/%s %v in %s\n", pkg, goos, goarch, extra, time.Since(start).Round(time.Second))
	return nil
}

// archive writes the binary's archive into r.dir (zip for Windows, else tar.gz) and returns its name.
func (r *release) archive(name, goos, goarch, bin string) (string, error) {
	inArchive, ext, pack := name, ".tar.gz", tarGz
	if goos == "windows" {
		inArchive, ext, pack = name+".exe", ".zip", zipArchive
	}
	ms, err := members(bin, inArchive, r.root)
	if err != nil {
		return "", err
	}
	b, err := pack(ms, r.created)
	if err != nil {
		return "", err
	}
	file := fmt.Sprintf("%s_%s_%s_%s%s", name, r.version, goos, goarch, ext)
	return file, os.WriteFile(filepath.Join(r.dir, file), b, 0o600)
}

func fileSHA256(file string) (string, error) {
	b, err := os.ReadFile(filepath.Clean(file))
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}
