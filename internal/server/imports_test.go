package server

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestHostsOnly: the server wires its parts and hosts them; it decides nothing. Its code (tests
// aside) imports none of what the decision is made with, so that a protocol cannot grow a
// decision of its own here: the decision is internal/server/keycheck's, and the protocols are
// adapters over it (internal/server/v1api, internal/server/authz).
func TestHostsOnly(t *testing.T) {
	const module = "github.com/switchboard-dev/switchboard/"
	forbidden := map[string]string{
		module + "internal/server/keyindex":  "the index: internal/server/indexfeed fills it, internal/server/keycheck and internal/server/v1api read it",
		module + "internal/server/ratelimit": "the rate limiter: internal/server/keycheck decides with it",
		module + "internal/apikey":           "the key format: internal/server/keycheck parses and checks keys",
		module + "internal/bearer":           "the Authorization field's format: internal/server/keycheck parses it",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var read []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, name)
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if why, ok := forbidden[path]; ok {
				t.Errorf("%s imports %s, %s", name, path, why)
			}
		}
	}
	if !slices.Contains(read, "server.go") {
		t.Fatalf("read %v, not the package's own files", read)
	}
}
