// Command release cuts a switchboard release without Docker: `make release VERSION=vX.Y.Z`
// runs it. From the commit checked out it writes, reproducibly (every time stamp is
// SOURCE_DATE_EPOCH, else the commit's time), into RELEASE_DIR:
//
//   - switchboard (linux/amd64, linux/arm64) and kubectl-switchboard (also darwin/amd64,
//     darwin/arm64, windows/amd64) archives carrying LICENSE and README.md, and checksums.txt;
//   - the multi-arch OCI image index (amd64 + arm64), as an OCI layout in image/, with the
//     OCI annotations (version, revision, source, licenses, created);
//   - a CycloneDX SBOM of every binary, attached to the index as an OCI 1.1 referrer;
//   - the Helm chart at version X.Y.Z, appVersion vX.Y.Z, with Artifact Hub's annotations;
//   - notes.md from CHANGELOG.md's section for the version, and the plugin's krew manifest;
//   - checksums.txt.sig, cosign's signature of checksums.txt, and cosign.pub, the release key's
//     public half it verifies with.
//
// With -registry it pushes the index, its SBOM and the chart (oci://REGISTRY/charts) there,
// and cosign's signatures of the index and of the chart beside them. It signs with the private
// key COSIGN_KEY (a file, or env://VAR) and its password COSIGN_PASSWORD, key-based and offline
// (no transparency log), and refuses to run without that key or with one that is not
// -cosign-pub's private half; -sign=false cuts an unsigned release, which its notes say.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

func main() {
	r := &release{out: os.Stdout}
	flag.StringVar(&r.version, "version", "", "the release's version, vX.Y.Z (required)")
	flag.StringVar(&r.dir, "dir", "bin/release", "where to write the artifacts")
	flag.StringVar(&r.registry, "registry", "", "host[:port][/path] to push the image, its SBOM and the chart to (plain HTTP on loopback); empty: push nothing")
	flag.StringVar(&r.imageRepo, "image-repo", "", "the image's repository; default REGISTRY/switchboard, else "+defaultImageRepo)
	flag.StringVar(&r.helm, "helm", "helm", "the helm binary")
	flag.StringVar(&r.changelog, "changelog", "CHANGELOG.md", "the changelog, which must have a section for the version")
	flag.StringVar(&r.krewBaseURL, "krew-base-url", "", "where the krew manifest downloads the plugin's archives; default the GitHub release's")
	flag.StringVar(&r.caCerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle the image carries, as `make image`'s")
	flag.StringVar(&r.root, "root", ".", "the repository's working tree")
	flag.StringVar(&r.validateKrew, "validate-krew-manifest", "", "krew's validate-krew-manifest, to check the krew manifest with (required)")
	sign := flag.Bool("sign", true, "sign with cosign and the key COSIGN_KEY (password COSIGN_PASSWORD); false: an unsigned dry run")
	s := &signer{key: os.Getenv("COSIGN_KEY"), password: os.Getenv("COSIGN_PASSWORD")}
	flag.StringVar(&s.cosign, "cosign", "", "the cosign binary, to sign with (required unless -sign=false; `make cosign` builds it)")
	flag.StringVar(&s.pub, "cosign-pub", "cosign.pub", "the release key's public half, which COSIGN_KEY must match; copied into the release")
	flag.Parse()
	if *sign {
		r.signer = s
	} else {
		fmt.Fprintln(os.Stderr, "release: WARNING: -sign=false: this release will NOT be signed")
	}
	if err := configure(r); err == nil {
		err = r.run()
		if err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
	} else {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(2)
	}
}

// configure fills what the flags leave to defaults: the commit, SOURCE_DATE_EPOCH, the image
// repository and the krew base URL.
func configure(r *release) error {
	if err := checkVersion(r.version); err != nil {
		return err
	}
	commit, err := git(r.root, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commit = commit
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git(r.root, "log", "-1", "--format=%ct"); err != nil {
			return err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || sec < 0 {
		return fmt.Errorf("SOURCE_DATE_EPOCH %q is not a count of seconds since 1970", epoch)
	}
	r.created = time.Unix(sec, 0).UTC()
	if r.imageRepo == "" {
		r.imageRepo = defaultImageRepo
		if r.registry != "" {
			r.imageRepo = strings.TrimSuffix(r.registry, "/") + "/switchboard"
		}
	}
	if r.validateKrew == "" {
		return fmt.Errorf("-validate-krew-manifest is required: `make validate-krew-manifest` builds it")
	}
	if r.krewBaseURL == "" {
		r.krewBaseURL = "https://github.com/switchboard-dev/switchboard/releases/download/" + r.version
	}
	return nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...) //nolint:gosec // fixed git subcommands
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}
