// Package architecture keeps the tree's account of itself true. docs/architecture.md: every
// path of this module the page names exists, and every product package (every package of this
// module that the commands in cmd/ link, as `go list -deps ./cmd/...` reports them) is named on
// it, so a package that moves, appears or goes away fails here until the page says so. And every
// package of the repository, test-only and build-tagged ones included, has a doc comment:
// revive's package-comments (make lint) skips test files, so it cannot see test/chart's.
package architecture

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	module = "github.com/switchboard-dev/switchboard"
	root   = "../.."
	page   = "docs/architecture.md"
)

// pathRE finds the module-relative paths a page names: a top-level directory that holds Go
// code, a slash, and the rest, not inside a longer word or path (so "docs/api/x" or
// "/openapi.yaml" are not taken for one).
var pathRE = regexp.MustCompile(`(?:^|[^\w/.-])((?:api|cmd|controllers|internal|hack|test)/[\w./-]*\w/?|(?:api|cmd|controllers|internal|hack|test)/)`)

// tickRE finds one-word code spans (`controllers`), which name a top-level package when a
// directory of that name holds Go code.
var tickRE = regexp.MustCompile("`([a-z][a-z0-9_-]*)`")

// namedPaths returns the module-relative paths text names, each once, in order: paths with a
// slash anywhere, and one-word code spans that are in topLevel.
func namedPaths(text string, topLevel []string) []string {
	var out []string
	add := func(p string) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, m := range pathRE.FindAllStringSubmatch(text, -1) {
		add(m[1])
	}
	for _, m := range tickRE.FindAllStringSubmatch(text, -1) {
		if slices.Contains(topLevel, m[1]) {
			add(m[1])
		}
	}
	return out
}

func TestNamedPaths(t *testing.T) {
	top := []string{"controllers"}
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"a package in a code span", "see `internal/server/keycheck`.", []string{"internal/server/keycheck"}},
		{"a package in a diagram label", `k["the decision<br/>internal/server/keycheck"]`, []string{"internal/server/keycheck"}},
		{"a file", "in `internal/server/keycheck/policy.go`, then", []string{"internal/server/keycheck/policy.go"}},
		{"a directory", "the suites in `test/`, the tools in `hack/`", []string{"test/", "hack/"}},
		{"named twice, listed once", "internal/apikey and internal/apikey", []string{"internal/apikey"}},
		{"a top-level package in a code span", "the reconcilers (`controllers`)", []string{"controllers"}},
		{"the bare word in prose is not a name", "the controllers and the tests", nil},
		{"inside a longer path", "docs/api/x, https://example.com/internal/x, /openapi.yaml", nil},
		{"a sentence's full stop is not part of it", "lives in internal/local/proc.", []string{"internal/local/proc"}},
		{"a code span not of a package", "`keycheck` and `cmd`", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := namedPaths(tt.text, top); !slices.Equal(got, tt.want) {
				t.Errorf("namedPaths(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

// TestPageNamesOnlyWhatExists fails for a path on the page that is not in the tree: a path
// ending in "/" must be a directory, one whose last element has a dot a file, any other a
// package (a directory with Go files).
func TestPageNamesOnlyWhatExists(t *testing.T) {
	for _, p := range namedPaths(readPage(t), topLevelPackages(t)) {
		if problem := checkExists(p); problem != "" {
			t.Errorf("%s names %s, %s", page, p, problem)
		}
	}
}

// TestPageNamesEveryProductPackage fails for a product package the page does not name.
func TestPageNamesEveryProductPackage(t *testing.T) {
	named := namedPaths(readPage(t), topLevelPackages(t))
	product := productPackages(t)
	if len(product) < 10 {
		t.Fatalf("go list found %d product packages (%q): too few to be the module's", len(product), product)
	}
	for _, p := range product {
		if !slices.Contains(named, p) {
			t.Errorf("%s does not name the product package %s: add it to the diagram or the table of packages", page, p)
		}
	}
}

// TestPageHasOneDiagram fails unless the page holds exactly one Mermaid diagram, which GitHub
// renders.
func TestPageHasOneDiagram(t *testing.T) {
	if n := strings.Count(readPage(t), "```mermaid\n"); n != 1 {
		t.Errorf("%s has %d Mermaid diagrams, want 1", page, n)
	}
}

func readPage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkExists says what is wrong with the module-relative path p, or "" when nothing is.
func checkExists(p string) string {
	full := filepath.Join(root, filepath.FromSlash(p))
	fi, err := os.Stat(full)
	switch {
	case err != nil:
		return "which does not exist"
	case strings.HasSuffix(p, "/"):
		if !fi.IsDir() {
			return "which is not a directory"
		}
	case strings.Contains(filepath.Base(p), "."):
		if fi.IsDir() {
			return "which is a directory, not a file"
		}
	case !hasGo(full):
		return "which is not a package (no .go file)"
	}
	return ""
}

func hasGo(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(files) > 0
}

// topLevelPackages are the module's top-level directories that are packages themselves.
func topLevelPackages(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && hasGo(filepath.Join(root, e.Name())) {
			out = append(out, e.Name())
		}
	}
	return out
}

// productPackages are the module-relative paths of this module's packages that cmd/... links.
func productPackages(t *testing.T) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./cmd/...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/...: %v", err)
	}
	var pkgs []string
	for _, line := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(line, module+"/"); ok {
			pkgs = append(pkgs, rel)
		}
	}
	return pkgs
}

// TestEveryPackageHasADocComment fails for a package of the repository (any directory of Go
// files outside testdata, whatever its build tags, in this module or a tool's) none of whose
// files has a doc comment on its package clause of the form "Package <name> …", or, for a
// command, any doc comment ("Command <name> …" by this repository's convention).
func TestEveryPackageHasADocComment(t *testing.T) {
	pkgs, err := packagesUnder(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 40 {
		t.Fatalf("found %d packages under %s: too few to be the repository's", len(pkgs), root)
	}
	for dir, docs := range pkgs {
		if problem := docProblem(docs); problem != "" {
			t.Errorf("%s: %s", dir, problem)
		}
	}
}

// packageDocs are the package name and the doc comments on the package clauses of one
// directory's files (the package's own, not an external _test package's, when it has both).
type packageDocs struct {
	name string
	docs []string
}

// docProblem says what is missing from a package's doc comments, or "" when nothing is.
func docProblem(p packageDocs) string {
	want := "Package " + p.name + " "
	for _, d := range p.docs {
		if p.name == "main" && strings.TrimSpace(d) != "" || strings.HasPrefix(d, want) {
			return ""
		}
	}
	if p.name == "main" {
		return "command has no doc comment (write one: \"Command <name> …\", saying its one job)"
	}
	return "package " + p.name + " has no doc comment of the form \"" + want + "…\" saying its one job"
}

func TestDocProblem(t *testing.T) {
	tests := []struct {
		name string
		pkg  packageDocs
		ok   bool
	}{
		{"a package comment", packageDocs{"keycheck", []string{"Package keycheck decides.\n"}}, true},
		{"in one file of several", packageDocs{"keycheck", []string{"", "Package keycheck decides.\n", ""}}, true},
		{"none", packageDocs{"keycheck", []string{"", ""}}, false},
		{"no file", packageDocs{"keycheck", nil}, false},
		{"another package's name", packageDocs{"keycheck", []string{"Package keyindex holds.\n"}}, false},
		{"not a package comment", packageDocs{"keycheck", []string{"Copyright the authors.\n"}}, false},
		{"a name that only starts the same", packageDocs{"key", []string{"Package keycheck decides.\n"}}, false},
		{"a command's", packageDocs{"main", []string{"Command bench measures.\n"}}, true},
		{"a command without one", packageDocs{"main", []string{""}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := docProblem(tt.pkg); (got == "") != tt.ok {
				t.Errorf("docProblem(%+v) = %q, want ok %v", tt.pkg, got, tt.ok)
			}
		})
	}
}

// packagesUnder parses the package clause of every Go file under dir, skipping testdata, hidden
// directories and bin/ (the built tools), and returns each directory's package.
func packagesUnder(dir string) (map[string]packageDocs, error) {
	byDir := map[string]map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != dir && (name == "testdata" || name == "bin" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(path))
		if err != nil {
			return err
		}
		if byDir[rel] == nil {
			byDir[rel] = map[string][]string{}
		}
		byDir[rel][f.Name.Name] = append(byDir[rel][f.Name.Name], f.Doc.Text())
		return nil
	})
	pkgs := map[string]packageDocs{}
	for rel, names := range byDir {
		for name, docs := range names {
			// An external test package (x_test) documents nothing of its own when x is there.
			if base, ok := strings.CutSuffix(name, "_test"); ok && names[base] != nil {
				continue
			}
			pkgs[filepath.ToSlash(rel)] = packageDocs{name: name, docs: docs}
		}
	}
	return pkgs, err
}

// diagram is the page's Mermaid diagram.
func diagram(t *testing.T) string {
	t.Helper()
	page := readPage(t)
	i := strings.Index(page, "```mermaid\n")
	j := strings.Index(page[max(i, 0):], "\n```")
	if i < 0 || j < 0 {
		t.Fatalf("%s has no Mermaid diagram", page)
	}
	return page[i : i+j]
}

// useRE finds a cobra command's name: the first word of its Use.
var useRE = regexp.MustCompile(`(?m)^\s*Use:\s*"([a-z-]+)`)

// TestDiagramShowsEveryComponent: every command of cmd/switchboard that runs a component (all
// but the root and `version`) is in the diagram as `switchboard <command>`, and the plugin of
// cmd/kubectl-switchboard as `kubectl switchboard`: a component added to cmd/ fails here until
// the page shows it.
func TestDiagramShowsEveryComponent(t *testing.T) {
	d := diagram(t)
	files, err := filepath.Glob(filepath.Join(root, "cmd", "switchboard", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var components []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range useRE.FindAllStringSubmatch(string(src), -1) {
			if name := m[1]; name != "switchboard" && name != "version" && !slices.Contains(components, name) {
				components = append(components, name)
			}
		}
	}
	if len(components) < 5 {
		t.Fatalf("found the commands %q in cmd/switchboard: too few to be its components", components)
	}
	for _, c := range components {
		if !strings.Contains(d, "switchboard "+c) {
			t.Errorf("the diagram of %s does not show `switchboard %s`, a component of cmd/switchboard", page, c)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "kubectl-switchboard")); err == nil && !strings.Contains(d, "kubectl switchboard") {
		t.Errorf("the diagram of %s does not show the plugin of cmd/kubectl-switchboard", page)
	}
}

// kindRE finds the kinds of a types file: a type that kubebuilder makes an object root.
var kindRE = regexp.MustCompile(`(?m)^// \+kubebuilder:object:root=true\n(?://.*\n|\n)*type (\w+) struct`)

// TestDiagramShowsEveryKind: every kind of api/v1alpha1 (its object roots but the lists) is in
// the diagram, where the objects each component reads and writes are.
func TestDiagramShowsEveryKind(t *testing.T) {
	d := diagram(t)
	files, err := filepath.Glob(filepath.Join(root, "api", "v1alpha1", "*_types.go"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range kindRE.FindAllStringSubmatch(string(src), -1) {
			if !strings.HasSuffix(m[1], "List") {
				kinds = append(kinds, m[1])
			}
		}
	}
	if len(kinds) < 2 {
		t.Fatalf("found the kinds %q in api/v1alpha1: too few", kinds)
	}
	for _, k := range kinds {
		if !strings.Contains(d, k) {
			t.Errorf("the diagram of %s does not show the kind %s of api/v1alpha1", page, k)
		}
	}
}
