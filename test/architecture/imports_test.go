package architecture

import (
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// The house's nevers (docs/architecture.md), held over the imports `go list` reports: what a
// package depends on, directly or through others, product files only (tests may reach across).
// A contract two components share lives in a package below both; a component that needs
// another's insides fails here, with the chain of imports that reaches them.

// never is one rule: no package of from depends on a package of to. Both are module-relative
// prefixes: a package and those below it.
type never struct {
	from, to []string
	why      string
}

// operatorPackages are the operator's: its host and the controllers it runs.
var operatorPackages = []string{"internal/operator", "internal/controller"}

// componentPackages are the packages of every component of cmd/ (the operator's, the
// server's, the panel's, the webhook sender's, the plugin's, switchboard dev's), as opposed to
// what they share.
var componentPackages = append([]string{"internal/server", "internal/panel", "internal/webhooksender", "internal/webhookdelivery",
	"internal/plugin", "internal/local"}, operatorPackages...)

var nevers = []never{
	{from: []string{"internal/panel"}, to: operatorPackages,
		why: "the panel calls the operator's reveal endpoint through the protocol both share (internal/keyclient/reveal)"},
	{from: []string{"internal/webhooksender"}, to: operatorPackages,
		why: "the sender shares with the operator only the signing copies' names (internal/keysecret), the reconcilers' helpers (internal/fairqueue, internal/objstatus) and the host (internal/frontdoor/ctrlhost)"},
	{from: []string{"internal/config", "api/config"}, to: componentPackages,
		why: "every component reads its configuration; configuration reads no component (a component's rule it needs lives below both)"},
	{from: []string{"internal/server/keycheck"}, to: []string{"internal/frontdoor", "internal/server/v1api", "internal/server/authz", "internal/server/apierror"},
		why: "the decision knows neither listeners nor wire formats: client addresses (internal/clientaddr) and the codes it answers with (internal/server/apicode) live below it and its adapters"},
}

// TestNevers fails for each package that depends on what a never forbids it.
func TestNevers(t *testing.T) {
	imports := moduleImports(t, "./...")
	for _, n := range nevers {
		found := 0
		for pkg := range imports {
			if !under(pkg, n.from) {
				continue
			}
			found++
			if chain := reach(imports, pkg, func(p string) bool { return under(p, n.to) }); chain != nil {
				t.Errorf("%s depends on %s (%s): %s", pkg, chain[len(chain)-1], strings.Join(chain, " → "), n.why)
			}
		}
		if found == 0 {
			t.Errorf("no package of this module is under %q: the rule holds nothing", n.from)
		}
	}
}

// TestProductImportsNoTestSupport: nothing the commands of cmd/ link is test support (under
// internal/testenv, or a package named *test: keyclienttest, keyindextest, keystatetest), so
// that a helper written for tests never runs in a switchboard process.
func TestProductImportsNoTestSupport(t *testing.T) {
	imports := moduleImports(t, "./cmd/...") // the product: every package the commands link
	for pkg, imps := range imports {
		for _, imp := range imps {
			if isTestSupport(imp) {
				t.Errorf("%s, a product package, imports the test support %s", pkg, imp)
			}
		}
	}
}

// isTestSupport says whether a module-relative package is test support.
func isTestSupport(pkg string) bool {
	return under(pkg, []string{"internal/testenv"}) || strings.HasSuffix(path.Base(pkg), "test")
}

func TestIsTestSupport(t *testing.T) {
	for pkg, want := range map[string]bool{
		"internal/testenv": true, "internal/testenv/system": true, "internal/server/keyindex/keyindextest": true,
		"internal/server/keyindex": false, "internal/testenvironment": false, "test/architecture": false,
	} {
		if got := isTestSupport(pkg); got != want {
			t.Errorf("isTestSupport(%q) = %v, want %v", pkg, got, want)
		}
	}
}

// under says whether the module-relative package pkg is one of prefixes or below one.
func under(pkg string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") })
}

// reach is the chain of imports from pkg to the first package it depends on that bad says is
// forbidden (pkg first), or nil when there is none: a breadth-first walk, so the chain is a
// shortest one.
func reach(imports map[string][]string, pkg string, bad func(string) bool) []string {
	from := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, next := range imports[p] {
			if _, seen := from[next]; seen {
				continue
			}
			from[next] = p
			if bad(next) {
				chain := []string{next}
				for q := p; q != ""; q = from[q] {
					chain = append([]string{q}, chain...)
				}
				return chain
			}
			queue = append(queue, next)
		}
	}
	return nil
}

func TestReach(t *testing.T) {
	imports := map[string][]string{"a": {"b", "c"}, "b": {"d"}, "c": {"d", "x/y"}, "d": {"x"}}
	bad := func(p string) bool { return under(p, []string{"x"}) }
	if got, want := reach(imports, "a", bad), []string{"a", "c", "x/y"}; !slices.Equal(got, want) {
		t.Errorf("reach from a = %q, want %q", got, want)
	}
	if got := reach(imports, "b", func(p string) bool { return p == "c" }); got != nil {
		t.Errorf("reach from b to c = %q, want none", got)
	}
}

// moduleImports are the direct imports, within this module, of each package of this module
// that patterns match or they depend on (module-relative paths; product files only).
func moduleImports(t *testing.T, patterns ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, patterns...)
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module+"/")
		if !ok {
			continue
		}
		imports[pkg] = []string{}
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	if len(imports) < 10 {
		t.Fatalf("go list found %d packages of this module: too few", len(imports))
	}
	return imports
}
