package frontdoor

import (
	"os"
	"strings"
	"testing"
)

// TestDocsTableIsTheDoors: docs/security.md's table of listeners is Doors, rendered: a limit
// changed in code and not in the docs (or the other way round) fails here.
func TestDocsTableIsTheDoors(t *testing.T) {
	raw, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	const begin, end = "<!-- doors:begin -->\n", "\n<!-- doors:end -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/security.md has no table between %q and %q", strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	if got, want := doc[i+len(begin):j], Table(); got != want {
		t.Errorf("docs/security.md's table of listeners is not frontdoor.Doors; it should read:\n%s", want)
	}
}

// TestDoorsAreWhole: every door has its limits, a name used once, and the test that attacks it.
func TestDoorsAreWhole(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Doors {
		if seen[d.Name] || d.Name == "" {
			t.Errorf("door %q: its name is empty or used twice", d.Name)
		}
		seen[d.Name] = true
		if (d.HTTP == nil) == (d.GRPC == nil) {
			t.Errorf("door %q: exactly one of HTTP and GRPC limits must be set", d.Name)
		}
		if l := d.HTTP; l != nil && (l.MaxConnections <= 0 || l.MaxConnectionsPerClient <= 0 || l.Headers <= 0 || l.Body <= 0 || l.Active <= 0 || l.Idle <= 0) {
			t.Errorf("door %q: an HTTP limit is unset: %+v", d.Name, *l)
		}
		if d.Attack == "" || d.Reach == "" || d.Flags == "" {
			t.Errorf("door %q: who reaches it, its flags and the test that attacks it must be named", d.Name)
		}
	}
}
