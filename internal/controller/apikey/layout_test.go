package apikey

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestConcernsDoNotImportTheHost: the host imports its concerns and none of their files, tests
// included, imports it back (the compiler refuses the cycle only for product files), and no
// product file imports the test support (keystatetest).
func TestConcernsDoNotImportTheHost(t *testing.T) {
	const host = "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	files, err := filepath.Glob("*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("*/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, more...)
	if len(files) < 10 {
		t.Fatalf("found %d files of the concerns: %v", len(files), files)
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.ToSlash(filepath.Dir(file))
		for _, spec := range f.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			switch concern, below := strings.CutPrefix(path, host+"/"); {
			case path == host:
				t.Errorf("%s imports the host, %s", file, host)
			case below && concern == "keystate/keystatetest" && !strings.HasSuffix(file, "_test.go") && dir != "keystate/keystatetest":
				t.Errorf("%s, a product file, imports the test support %s", file, concern)
			}
		}
	}
}
