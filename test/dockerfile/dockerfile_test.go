//go:build !unit

// Package dockerfile checks the Dockerfile without a Docker engine: it copies exactly what the
// build stage COPYs into an empty directory, runs the stage's `go build` line there, and checks
// the result is the static binary the distroless image needs.
package dockerfile

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// dockerfile is the parsed part of the Dockerfile the test needs.
type dockerfile struct {
	args       map[string]string // ARG defaults of the build stage
	copies     []string          // sources of the build stage's COPY lines
	buildLine  string            // the RUN line that runs go build
	froms      []string          // every FROM image
	user       string            // the final USER
	entrypoint string            // the final ENTRYPOINT, as written
	labels     map[string]string // the final stage's LABELs, unexpanded
	binaryDest string            // where the final stage copies the built binary
}

func parse(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	d := dockerfile{args: map[string]string{}, labels: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			d.froms = append(d.froms, strings.Fields(rest)[0])
		case "ARG":
			name, value, _ := strings.Cut(rest, "=")
			d.args[name] = value
		case "COPY":
			fields := strings.Fields(rest)
			if strings.HasPrefix(fields[0], "--from") {
				d.binaryDest = fields[len(fields)-1]
				continue
			}
			d.copies = append(d.copies, fields[:len(fields)-1]...)
		case "RUN":
			if strings.Contains(rest, "go build") {
				if strings.HasSuffix(rest, "\\") {
					t.Fatal("the go build RUN line continues over several lines; keep it on one (this test runs it)")
				}
				d.buildLine = rest
			}
		case "USER":
			d.user = rest
		case "ENTRYPOINT":
			d.entrypoint = rest
		case "LABEL":
			name, value, _ := strings.Cut(rest, "=")
			d.labels[name] = strings.Trim(value, `"`)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDockerfileBuildCompiles(t *testing.T) {
	root := testenv.RepoRoot()
	d := parse(t, filepath.Join(root, "Dockerfile"))

	if len(d.froms) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a multi-stage build", len(d.froms))
	}
	if last := d.froms[len(d.froms)-1]; last != "gcr.io/distroless/static:nonroot" {
		t.Errorf("the final image is %s, want gcr.io/distroless/static:nonroot", last)
	}
	if !strings.HasPrefix(d.user, "65532") {
		t.Errorf("USER is %q, want 65532 (distroless nonroot)", d.user)
	}
	for _, flag := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/switchboard"} {
		if !strings.Contains(d.buildLine, flag) {
			t.Errorf("the go build line lacks %s: %s", flag, d.buildLine)
		}
	}

	// The build context: only what the stage COPYs, as in a docker build.
	ctxDir := t.TempDir()
	for _, src := range d.copies {
		if err := exec.Command("cp", "-a", filepath.Join(root, src), filepath.Join(ctxDir, src)).Run(); err != nil {
			t.Fatalf("copying %s into the build context: %v", src, err)
		}
	}
	out := t.TempDir()
	// The build platform is this machine's, as `docker buildx` passes TARGETOS/TARGETARCH.
	d.args["TARGETOS"], d.args["TARGETARCH"] = runtime.GOOS, runtime.GOARCH
	cmdline := regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`).ReplaceAllStringFunc(d.buildLine, func(m string) string {
		name := strings.Trim(m, "${}")
		if v, ok := d.args[name]; ok {
			return v
		}
		t.Fatalf("the go build line uses %s, which no ARG defines", m)
		return ""
	})
	cmdline = strings.Replace(cmdline, "-o /out/switchboard", "-o "+filepath.Join(out, "switchboard"), 1)
	if !strings.Contains(cmdline, out) {
		t.Fatalf("the go build line does not write -o /out/switchboard, which the final stage copies: %s", d.buildLine)
	}
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = ctxDir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build line failed in a context of only %v:\n%s\n%s", d.copies, cmdline, b)
	}

	bin := filepath.Join(out, "switchboard")
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the build wrote no ELF binary: %v", err)
	}
	defer func() { _ = ef.Close() }()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary is dynamically linked; distroless/static has no libc")
		}
	}
	if b, err := exec.Command(bin, "--version").CombinedOutput(); err != nil || !strings.Contains(string(b), "switchboard") {
		t.Fatalf("the built binary does not run: %v\n%s", err, b)
	}
}
