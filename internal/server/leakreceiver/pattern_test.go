package leakreceiver

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// TestDocsPatternMatchesKeys: the pattern docs/leaks.md tells platforms to register with GitHub
// matches every key switchboard issues, whole, and no shorter or longer run of the format (a
// pattern that missed keys would leave leaks unreported).
func TestDocsPatternMatchesKeys(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/leaks.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^\\| Secret format \\| `([^`]+)` \\|$").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/leaks.md has no row | Secret format | `…` |")
	}
	// Hyperscan and Go's RE2 agree on this subset; the boundaries are the table's other rows.
	pattern := regexp.MustCompile(`(?:\A|[^0-9A-Za-z_])(` + string(m[1]) + `)(?:\z|[^0-9A-Za-z])`)
	for range 100 {
		key, err := apikey.Generate(apikey.DefaultPrefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{key, "API_KEY=" + key + "\n", `"` + key + `"`} {
			if got := pattern.FindStringSubmatch(text); got == nil || got[1] != key {
				t.Fatalf("the docs' pattern does not find the key in %q: %q", text, got)
			}
		}
		for _, near := range []string{key[:len(key)-1], key + "x", "x" + key} {
			if pattern.MatchString(near) {
				t.Errorf("the docs' pattern matches %q, which is no key", near)
			}
		}
	}
	if !strings.HasPrefix(string(m[1]), apikey.DefaultPrefix+apikey.LiveMarker) {
		t.Errorf("the docs' pattern %q does not begin with the default prefix", m[1])
	}
}
