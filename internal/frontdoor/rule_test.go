package frontdoor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The rule of issue 29: product code opens and serves sockets only through this package, so
// that no listener goes without a door's limits. TestEveryListenerGoesThroughTheFrontDoor reads
// every non-test Go file of the module (parsed, not built: files of every build tag count) and
// names each place that opens or serves a socket outside it, and each controller-runtime
// manager or webhook server left to open its own (they offer no hook to bound them: the
// operator and the server turn them off and serve probes, metrics and webhooks through here).

// allowed are the files and folders (ending in /) that may open or serve sockets themselves,
// relative to the module's root, each with why.
var allowed = map[string]string{
	"internal/frontdoor/":    "the front door itself",
	"internal/testenv/":      "test support: free ports for the tests, the /v1 listener a test system hands to server.Run (which serves it through the door)",
	"internal/local/oidcop/": "the tests' OpenID Provider, never part of a switchboard process",
	"internal/local/devenv/devenv.go": "checkListen and freeLoopbackAddr open and close a port at once, to fail early on one in use " +
		"and to choose free ones for etcd and the webhook; the operator and server then serve theirs through the door",
	"internal/local/cluster/namespace.go": "Listen opens a test's listener inside the test cluster's network namespace (the registry " +
		"the node pulls the release from), never part of a switchboard process",
	"hack/": "development tools and benchmarks, not the product",
}

// listenerCall is a place in a file that opens or serves a socket.
type listenerCall struct {
	Line int
	What string
}

// netPkgs are the import paths whose functions open or serve sockets, and those functions
// (listenerType marks a type whose only use is to listen).
var netPkgs = map[string][]string{
	"net":                    {"Listen", "ListenTCP", "ListenUnix", listenerType + "ListenConfig"},
	"crypto/tls":             {"Listen"},
	"net/http":               {"ListenAndServe", "ListenAndServeTLS", "Serve", "ServeTLS"},
	"net/http/httptest":      {"NewServer", "NewTLSServer", "NewUnstartedServer"},
	"google.golang.org/grpc": {"NewServer"},
}

const listenerType = "type:"

// listenerCalls are the places in f that open or serve a socket: a call of a function of
// netPkgs, any use of net.ListenConfig (it exists to listen), and an http.Server built
// (a composite literal or new(http.Server)), under whatever name each package is imported.
func listenerCalls(fset *token.FileSet, f *ast.File) []listenerCall {
	names := map[string]string{} // local name → import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = path
	}
	// ref says which package-level name of which import sel is, if any.
	ref := func(e ast.Expr) (path, name string, ok bool) {
		sel, isSel := e.(*ast.SelectorExpr)
		if !isSel {
			return "", "", false
		}
		id, isID := sel.X.(*ast.Ident)
		if !isID || id.Obj != nil { // a local variable, not a package
			return "", "", false
		}
		path, ok = names[id.Name]
		return path, sel.Sel.Name, ok
	}
	var found []listenerCall
	add := func(n ast.Node, what string) {
		found = append(found, listenerCall{Line: fset.Position(n.Pos()).Line, What: what})
	}
	// The values given to a field named Server in a composite literal: a webhook server
	// embedded in a type of ours (whose Start serves it through the door).
	embedded := map[ast.Expr]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Server" {
				embedded[kv.Value] = true
			}
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			path, name, ok := ref(n.Fun)
			switch {
			case ok && slices.Contains(netPkgs[path], name):
				add(n, path+"."+name)
			case ok && (path == ctrlPkg && name == "NewManager" || path == ctrlPkg+"/pkg/manager" && name == "New"):
				if what := managerListeners(n, ref); what != "" {
					add(n, what)
				}
			case ok && path == ctrlPkg+"/pkg/webhook" && name == "NewServer" && !embedded[n]:
				add(n, "webhook.NewServer (its Start listens with tls.Listen) not embedded in a type that serves it through the door")
			}
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && id.Obj == nil && len(n.Args) == 1 {
				if path, name, ok := ref(n.Args[0]); ok && path == "net/http" && name == "Server" {
					add(n, "new(http.Server)")
				}
			}
		case *ast.CompositeLit:
			if path, name, ok := ref(n.Type); ok && path == "net/http" && name == "Server" {
				add(n, "http.Server{…}")
			}
		case *ast.SelectorExpr:
			if path, name, ok := ref(n); ok && slices.Contains(netPkgs[path], listenerType+name) {
				add(n, path+"."+name)
			}
		}
		return true
	})
	return found
}

const ctrlPkg = "sigs.k8s.io/controller-runtime"

// managerListeners says which of a controller-runtime manager's own listeners the options of
// call (ctrl.NewManager or manager.New) leave on, if any: its metrics server (on :8080 unless
// Metrics.BindAddress is "0") and its probe server (when HealthProbeBindAddress is set).
func managerListeners(call *ast.CallExpr, ref func(ast.Expr) (string, string, bool)) string {
	if len(call.Args) != 2 {
		return "a manager whose options cannot be read"
	}
	opts, ok := unaddr(call.Args[1]).(*ast.CompositeLit)
	if !ok {
		return "a manager whose options are not a literal here (they must turn off its metrics and probe listeners)"
	}
	metricsOff := false
	for _, e := range opts.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		switch key, _ := kv.Key.(*ast.Ident); {
		case key == nil:
		case key.Name == "HealthProbeBindAddress" && !isZeroAddr(kv.Value):
			return "a manager serving its own probe listener (HealthProbeBindAddress not \"0\")"
		case key.Name == "Metrics":
			if m, ok := unaddr(kv.Value).(*ast.CompositeLit); ok {
				for _, e := range m.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if key, _ := kv.Key.(*ast.Ident); key != nil && key.Name == "BindAddress" && isZeroAddr(kv.Value) {
							metricsOff = true
						}
					}
				}
			}
		case key.Name == "WebhookServer":
			if c, ok := kv.Value.(*ast.CallExpr); ok {
				if path, name, ok := ref(c.Fun); ok && path == ctrlPkg+"/pkg/webhook" && name == "NewServer" {
					return "a manager with controller-runtime's own webhook server"
				}
			}
		}
	}
	if !metricsOff {
		return "a manager serving its own metrics listener (Metrics.BindAddress not \"0\")"
	}
	return ""
}

// unaddr is e without a leading &.
func unaddr(e ast.Expr) ast.Expr {
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		return u.X
	}
	return e
}

// isZeroAddr says whether e is the literal "0", controller-runtime's address that listens on
// nothing.
func isZeroAddr(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && lit.Value == `"0"`
}

// TestListenerCalls: listenerCalls finds what opens or serves a socket under any import name,
// and nothing else.
func TestListenerCalls(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"nothing", `package p; import "net"; func f() { _, _ = net.Dial("tcp", "x") }`, nil},
		{"net.Listen", `package p; import "net"; func f() { _, _ = net.Listen("tcp", ":0") }`, []string{"net.Listen"}},
		{"renamed", `package p; import stdnet "net"; func f() { _, _ = stdnet.ListenTCP("tcp", nil) }`, []string{"net.ListenTCP"}},
		{"tls.Listen", `package p; import "crypto/tls"; func f() { _, _ = tls.Listen("tcp", ":0", nil) }`, []string{"crypto/tls.Listen"}},
		{"a ListenConfig", `package p; import ("context"; "net"); func f() { var lc net.ListenConfig; _, _ = lc.Listen(context.TODO(), "tcp", ":0") }`,
			[]string{"net.ListenConfig"}},
		{"a ListenConfig literal", `package p; import ("context"; "net"); func f() { _, _ = (&net.ListenConfig{}).Listen(context.TODO(), "tcp", ":0") }`,
			[]string{"net.ListenConfig"}},
		{"http.Server literal", `package p; import "net/http"; func f() { _ = &http.Server{} }`, []string{"http.Server{…}"}},
		{"new(http.Server)", `package p; import "net/http"; func f() { _ = new(http.Server) }`, []string{"new(http.Server)"}},
		{"an http.Server parameter", `package p; import "net/http"; func f(s *http.Server) { _ = s }`, nil},
		{"http.ListenAndServe", `package p; import "net/http"; func f() { _ = http.ListenAndServe(":0", nil) }`, []string{"net/http.ListenAndServe"}},
		{"http.Serve", `package p; import "net/http"; func f() { _ = http.Serve(nil, nil) }`, []string{"net/http.Serve"}},
		{"http.ServeFile serves no socket", `package p; import "net/http"; func f() { http.ServeFile(nil, nil, "") }`, nil},
		{"grpc.NewServer", `package p; import "google.golang.org/grpc"; func f() { _ = grpc.NewServer() }`, []string{"google.golang.org/grpc.NewServer"}},
		{"httptest", `package p; import "net/http/httptest"; func f() { _ = httptest.NewServer(nil) }`, []string{"net/http/httptest.NewServer"}},
		{"a variable named like a package", `package p; import "net"; func f() { var net struct{ Listen func() }; net.Listen() }`, nil},
		{"a manager with its listeners off", `package p; import (ctrl "sigs.k8s.io/controller-runtime"; metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server")
			func f() { _, _ = ctrl.NewManager(nil, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}) }`, nil},
		{"a manager with its default metrics", `package p; import ctrl "sigs.k8s.io/controller-runtime"
			func f() { _, _ = ctrl.NewManager(nil, ctrl.Options{HealthProbeBindAddress: "0"}) }`,
			[]string{"a manager serving its own metrics listener (Metrics.BindAddress not \"0\")"}},
		{"a manager with its own probes", `package p; import ("sigs.k8s.io/controller-runtime/pkg/manager"; metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server")
			func f(a string) { _, _ = manager.New(nil, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: a}) }`,
			[]string{"a manager serving its own probe listener (HealthProbeBindAddress not \"0\")"}},
		{"a manager with options from elsewhere", `package p; import ctrl "sigs.k8s.io/controller-runtime"; func f(o ctrl.Options) { _, _ = ctrl.NewManager(nil, o) }`,
			[]string{"a manager whose options are not a literal here (they must turn off its metrics and probe listeners)"}},
		{"a manager with controller-runtime's webhook server", `package p; import (ctrl "sigs.k8s.io/controller-runtime"; metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"; "sigs.k8s.io/controller-runtime/pkg/webhook")
			func f() { _, _ = ctrl.NewManager(nil, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, WebhookServer: webhook.NewServer(webhook.Options{})}) }`,
			[]string{"a manager with controller-runtime's own webhook server",
				"webhook.NewServer (its Start listens with tls.Listen) not embedded in a type that serves it through the door"}},
		{"a webhook server elsewhere", `package p; import "sigs.k8s.io/controller-runtime/pkg/webhook"
			func f() any { return []webhook.Server{webhook.NewServer(webhook.Options{})} }`,
			[]string{"webhook.NewServer (its Start listens with tls.Listen) not embedded in a type that serves it through the door"}},
		{"a webhook server embedded", `package p; import "sigs.k8s.io/controller-runtime/pkg/webhook"; type s struct{ webhook.Server }
			func f() any { return &s{Server: webhook.NewServer(webhook.Options{})} }`, nil},
		{"another package's Listen", `package p; import "example.com/net"; func f() { net.Listen() }`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", tt.src, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range listenerCalls(fset, f) {
				got = append(got, c.What)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("found %q, want %q", got, tt.want)
			}
		})
	}
}

// TestEveryListenerGoesThroughTheFrontDoor (issue 29): no product code outside this package
// opens or serves a socket itself, but what allowed names.
func TestEveryListenerGoesThroughTheFrontDoor(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root is not %s: %v", root, err)
	}
	used := map[string]bool{}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		calls := listenerCalls(fset, f)
		if len(calls) == 0 {
			return nil
		}
		for prefix := range allowed {
			if rel == prefix || strings.HasSuffix(prefix, "/") && strings.HasPrefix(rel, prefix) {
				used[prefix] = true
				return nil
			}
		}
		for _, c := range calls {
			t.Errorf("%s:%d: %s: every serving listener goes through the front door (declared as a frontdoor.Listener to a frontdoor.Group)",
				rel, c.Line, c.What)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d files under %s", files, root)
	}
	for prefix := range allowed {
		if !used[prefix] {
			t.Errorf("allowed names %s, which opens no socket any more: take it out", prefix)
		}
	}
}
