package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-dev/switchboard/internal/local/image"
)

// defaultImageRepo is the chart's image.repository as committed; a release to another
// registry points the packaged chart at its own image.
const defaultImageRepo = "ghcr.io/switchboard-dev/switchboard"

// packageChart copies charts/switchboard, stamps the release on it (Artifact Hub's
// annotations, the image repository) and packages it with helm at version X.Y.Z, appVersion
// vX.Y.Z (the image tag the chart defaults to); it returns the package's file name in r.dir.
func packageChart(r *release, changes string) (string, error) {
	tmp, err := os.MkdirTemp("", "switchboard-chart-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	src := filepath.Join(r.root, "charts", "switchboard")
	dst := filepath.Join(tmp, "switchboard")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return "", fmt.Errorf("copying the chart: %w", err)
	}

	chartFile := filepath.Join(dst, "Chart.yaml")
	b, err := os.ReadFile(chartFile) //nolint:gosec // the copy made above
	if err != nil {
		return "", err
	}
	var chart map[string]any
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return "", fmt.Errorf("charts/switchboard/Chart.yaml: %w", err)
	}
	ann, _ := chart["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	images, err := yaml.Marshal([]map[string]string{{"name": "switchboard", "image": r.imageRef()}})
	if err != nil {
		return "", err
	}
	ann["artifacthub.io/changes"] = changes
	ann["artifacthub.io/license"] = image.License
	ann["artifacthub.io/images"] = string(images)
	chart["annotations"] = ann
	if b, err = yaml.Marshal(chart); err != nil {
		return "", err
	}
	if err := os.WriteFile(chartFile, b, 0o600); err != nil {
		return "", err
	}

	if repo := r.imageRepo; repo != defaultImageRepo {
		values := filepath.Join(dst, "values.yaml")
		b, err := os.ReadFile(values) //nolint:gosec // the copy made above
		if err != nil {
			return "", err
		}
		line := "  repository: " + defaultImageRepo + "\n"
		if !strings.Contains(string(b), line) {
			return "", fmt.Errorf("charts/switchboard/values.yaml has no line %q to point at %s", strings.TrimSpace(line), repo)
		}
		s := strings.Replace(string(b), line, "  repository: "+repo+"\n", 1)
		if err := os.WriteFile(values, []byte(s), 0o600); err != nil { //nolint:gosec // the copy made above
			return "", err
		}
	}
	out, err := r.helmCmd("package", dst, "--version", strings.TrimPrefix(r.version, "v"),
		"--app-version", r.version, "--destination", r.dir).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("helm package: %w: %s", err, out)
	}
	pkg := "switchboard-" + strings.TrimPrefix(r.version, "v") + ".tgz"
	// helm package stamps every file with the current time: restamp them with the release's,
	// for a reproducible package.
	return pkg, restamp(filepath.Join(r.dir, pkg), r.created)
}

// restamp rewrites a gzipped tar with every member's time set to mtime and a gzip header
// without name or time, keeping the members, their order, modes and contents.
func restamp(file string, mtime time.Time) error {
	b, err := os.ReadFile(filepath.Clean(file))
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		h.ModTime, h.AccessTime, h.ChangeTime = mtime.UTC(), time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil { //nolint:gosec // a chart helm just packaged
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Clean(file), buf.Bytes(), 0o600)
}

// pushChart pushes the packaged chart to oci://REGISTRY/charts and returns the digest helm
// says it pushed, which the release signs.
func pushChart(r *release, pkg string) (string, error) {
	args := []string{"push", filepath.Join(r.dir, pkg), "oci://" + r.registry + "/charts"}
	if len(nameOptions(r.registry)) > 0 {
		args = append(args, "--plain-http")
	}
	out, err := r.helmCmd(args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("helm push: %w: %s", err, out)
	}
	return pushedDigest(string(out))
}

// pushedDigest reads the "Digest: sha256:…" line of helm push's output.
func pushedDigest(out string) (string, error) {
	for line := range strings.SplitSeq(out, "\n") {
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "Digest: "); ok {
			if h, err := v1.NewHash(d); err == nil {
				return h.String(), nil
			}
		}
	}
	return "", fmt.Errorf("helm push said no digest: %s", out)
}

func (r *release) helmCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(r.helm, args...) //nolint:gosec // the helm binary the Makefile names
	cmd.Env = os.Environ()
	return cmd
}
