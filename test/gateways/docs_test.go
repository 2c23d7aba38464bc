//go:build !unit

package gateways

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// docBlock is a fenced block of docs/gateways.md and the marker comment above it.
type docBlock struct {
	marker, lang, body string
	line               int
}

var fence = regexp.MustCompile("(?m)^(?:<!-- (.+?) -->\\n)?```(\\w*)\\n")

func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "gateways.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	var blocks []docBlock
	for rest, offset := text, 0; ; {
		m := fence.FindStringSubmatchIndex(rest)
		if m == nil {
			break
		}
		bodyStart := m[1]
		end := strings.Index(rest[bodyStart:], "\n```\n")
		if end < 0 {
			t.Fatalf("docs/gateways.md: the block at line %d is not closed", strings.Count(text[:offset+m[0]], "\n")+1)
		}
		b := docBlock{lang: rest[m[4]:m[5]], body: rest[bodyStart : bodyStart+end+1], line: strings.Count(text[:offset+m[0]], "\n") + 1}
		if m[2] >= 0 {
			b.marker = rest[m[2]:m[3]]
		}
		blocks = append(blocks, b)
		next := bodyStart + end + len("\n```\n")
		offset += next
		rest = rest[next:]
	}
	return blocks
}

// TestDocsShowTheExamples: every example file is shown in docs/gateways.md as it is (so what
// the page shows is what TestExamplesApplyToTheRealCRDs dry-runs), and the page holds no YAML
// that no test checks.
func TestDocsShowTheExamples(t *testing.T) {
	files, err := os.ReadDir(examplesDir())
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]int{}
	for _, b := range docBlocks(t) {
		name, isExample := strings.CutPrefix(b.marker, "example: ")
		switch {
		case isExample:
			shown[name]++
			want, err := os.ReadFile(filepath.Join(examplesDir(), name))
			if err != nil {
				t.Errorf("docs/gateways.md line %d shows %s, which examples/gateways does not hold", b.line, name)
				continue
			}
			if b.body != string(want) {
				t.Errorf("docs/gateways.md line %d: the block is not examples/gateways/%s as it is", b.line, name)
			}
		case b.marker == "chart values":
		case b.lang == "yaml" || b.lang == "nginx" || b.lang == "caddyfile":
			t.Errorf("docs/gateways.md line %d: a %s block that is neither an example file nor the chart values", b.line, b.lang)
		}
	}
	for _, f := range files {
		if n := shown[f.Name()]; n != 1 {
			t.Errorf("docs/gateways.md shows examples/gateways/%s %d times, want once", f.Name(), n)
		}
	}
}

// testDocsChartValues renders the chart with the values docs/gateways.md shows: its schema must
// take them, and the API server every object they render.
func testDocsChartValues(t *testing.T, env *testenv.Env) {
	var values []string
	for _, b := range docBlocks(t) {
		if b.marker == "chart values" {
			values = append(values, b.body)
		}
	}
	if len(values) == 0 {
		t.Fatal("docs/gateways.md shows no chart values")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, v := range values {
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(testenv.Helm(t), "template", "switchboard", filepath.Join(testenv.RepoRoot(), "charts", "switchboard"),
			"--namespace", releaseNamespace, "-f", file)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("the chart refuses the values of docs/gateways.md (block %d): %v\n%s", i+1, err, stderr.String())
		}
		objs := decodeYAMLStream(t, stdout.Bytes())
		var authz bool
		for _, o := range objs {
			authz = authz || o.GetKind() == "Service" && o.GetName() == "switchboard-authz"
			if err := serverDryRun(ctx, env, o); err != nil {
				t.Errorf("block %d renders %s, which the API server refuses: %v", i+1, objectName(o), err)
			}
		}
		if !authz {
			t.Errorf("block %d renders no Service switchboard-authz", i+1)
		}
	}
}
