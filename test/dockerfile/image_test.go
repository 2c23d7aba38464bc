//go:build !unit

package dockerfile

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/local/image"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/version"
)

// testVersion and testRevision are the VERSION and REVISION both builds are given.
const (
	testVersion  = "v0.0.0-dockerfile-test"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

// expand replaces ${NAME} and $NAME with vars, failing on a name vars lacks.
func expand(t *testing.T, s string, vars map[string]string) string {
	t.Helper()
	return regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`).ReplaceAllStringFunc(s, func(m string) string {
		v, ok := vars[strings.Trim(m, "${}")]
		if !ok {
			t.Fatalf("%q uses %s, which is not defined", s, m)
		}
		return v
	})
}

// makeBuildLine is the go build command `make image` runs (make -n prints it).
func makeBuildLine(t *testing.T, root, imageDir string) string {
	t.Helper()
	cmd := exec.Command("make", "-n", "image", "VERSION="+testVersion, "REVISION="+testRevision, "IMAGE_DIR="+imageDir)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n image: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "go build") {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("make -n image runs no go build:\n%s", out)
	return ""
}

// TestImageMatchesDockerfile builds the image with `make image`, as people without Docker do,
// and checks it is the one the Dockerfile describes: the same go build command, the binary
// where the final stage copies it, the same user, entrypoint and labels, on distroless's
// passwd and group.
func TestImageMatchesDockerfile(t *testing.T) {
	root := testenv.RepoRoot()
	d := parse(t, filepath.Join(root, "Dockerfile"))
	imageDir := t.TempDir()

	vars := map[string]string{"TARGETOS": "linux", "TARGETARCH": runtime.GOARCH, "VERSION": testVersion, "REVISION": testRevision}
	want := strings.Replace(expand(t, d.buildLine, vars), "-o /out/switchboard", "-o "+filepath.Join(imageDir, "switchboard"), 1)
	if got := makeBuildLine(t, root, imageDir); got != want {
		t.Errorf("make image and the Dockerfile build differently:\n make:       %s\n Dockerfile: %s", got, want)
	}

	cmd := exec.Command("make", "image", "VERSION="+testVersion, "REVISION="+testRevision, "IMAGE_DIR="+imageDir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	name, img, err := image.ReadTarball(filepath.Join(imageDir, "switchboard.tar"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if name != "localhost/switchboard:"+testVersion {
		t.Errorf("the image is named %q, want localhost/switchboard:%s", name, testVersion)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != d.user {
		t.Errorf("the image runs as %q, the Dockerfile's USER is %q", cf.Config.User, d.user)
	}
	var entrypoint []string
	if err := json.Unmarshal([]byte(d.entrypoint), &entrypoint); err != nil {
		t.Fatalf("the Dockerfile's ENTRYPOINT %s is not the exec (JSON) form: %v", d.entrypoint, err)
	}
	if !slices.Equal(cf.Config.Entrypoint, entrypoint) {
		t.Errorf("the image's entrypoint is %q, the Dockerfile's %q", cf.Config.Entrypoint, entrypoint)
	}
	if len(cf.Config.Labels) != len(d.labels) {
		t.Errorf("the image has labels %v, the Dockerfile %v", cf.Config.Labels, d.labels)
	}
	for k, v := range d.labels {
		if got := cf.Config.Labels[k]; got != expand(t, v, vars) {
			t.Errorf("label %s is %q in the image, %q in the Dockerfile", k, got, expand(t, v, vars))
		}
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("the image is for %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}

	bin := strings.TrimPrefix(d.binaryDest, "/")
	files, contents, err := image.Files(img, bin, "etc/passwd", "etc/group")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{bin, "etc/ssl/certs/ca-certificates.crt", "tmp", "home/nonroot"} {
		if !slices.Contains(files, want) {
			t.Errorf("the image lacks /%s, which the Dockerfile's image has; it has %v", want, files)
		}
	}
	if string(contents["etc/passwd"]) != image.Passwd || string(contents["etc/group"]) != image.Group {
		t.Errorf("/etc/passwd and /etc/group are not distroless's:\n%s\n%s", contents["etc/passwd"], contents["etc/group"])
	}
	exe := filepath.Join(t.TempDir(), "switchboard")
	if err := os.WriteFile(exe, contents[bin], 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(exe, "--version").CombinedOutput(); err != nil || !strings.Contains(string(out), testVersion) {
		t.Errorf("the image's /%s --version: %v %s, want it to say %s", bin, err, out, testVersion)
	}
	var info version.Info
	if out, err := exec.Command(exe, "version", "-o", "json").Output(); err != nil || json.Unmarshal(out, &info) != nil ||
		info.Version != testVersion || info.Commit != testRevision {
		t.Errorf("the image's /%s version -o json: %v %s, want version %s and commit %s", bin, err, out, testVersion, testRevision)
	}
	// Pods run it on a read-only root file system with no volume: it must start without any
	// writable directory (envtest, linked by `switchboard dev`, panics at init without one).
	for _, args := range [][]string{{"--version"}, {"operator", "--help"}, {"server", "--help"}, {"panel", "--help"}} {
		cmd := exec.Command(exe, args...)
		cmd.Env = []string{"HOME=/proc", "TMPDIR=/proc", "XDG_CACHE_HOME=/proc"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("the image's /%s %s with nothing writable: %v\n%s", bin, strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command(exe, "dev").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "make dev") {
		t.Errorf("the image's /%s dev: %v %s, want a clear refusal naming `make dev`", bin, err, out)
	}
}
