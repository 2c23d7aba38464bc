// Package docs keeps the documentation's links true: every relative link of README.md,
// CHANGELOG.md and docs/ names a file of the repository, and every #anchor a heading of the page
// it points into, so moving a section or a page cannot leave a reader at a dead end.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, two directories up from this package.
var root = filepath.Join("..", "..")

var (
	// link is a Markdown inline link or image; the target ends at the first space or ")".
	link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// heading is an ATX heading.
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	// fence opens or closes a fenced code block, whose lines are not Markdown.
	fence = regexp.MustCompile("^\\s*(```|~~~)")
)

// pages lists the Markdown files whose links are checked.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, rel)
	}
	return files
}

// prose is text without its fenced code blocks.
func prose(text string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// slug is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces to "-".
func slug(h string) string {
	h = regexp.MustCompile("`|\\*\\*|\\[|\\]\\([^)]*\\)").ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors of a page's headings, with GitHub's -1, -2 for repeats.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(prose(text), -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

func TestLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(prose(string(text)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue // the internet: not checked here
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(filepath.Dir(filepath.Join(root, page)), file)
			if file == "" {
				path = filepath.Join(root, page)
			}
			body, err := os.ReadFile(path)
			if err != nil {
				if st, serr := os.Stat(path); serr == nil && st.IsDir() {
					continue // a directory: GitHub lists it
				}
				t.Errorf("%s links to %s, which does not exist", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(string(body))[anchor] {
				t.Errorf("%s links to %s, but %s has no heading with anchor #%s", page, target, file, anchor)
			}
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Quick start":                        "quick-start",
		"15. One front door: every listener": "15-one-front-door-every-listener",
		"The `/v1` API":                      "the-v1-api",
		"Keys that look after themselves: lifetimes, renewal, unused keys": "keys-that-look-after-themselves-lifetimes-renewal-unused-keys",
		"Sign in with your identity provider (OIDC)":                       "sign-in-with-your-identity-provider-oidc",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAnchorsCountRepeats(t *testing.T) {
	got := anchors("# A\n\n## B\n\n```\n# not a heading\n```\n\n## B\n")
	for _, want := range []string{"a", "b", "b-1"} {
		if !got[want] {
			t.Errorf("anchors lack %q: %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code block was taken for a heading")
	}
}
