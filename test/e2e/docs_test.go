//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The docs' fenced blocks and the comment marker on the line above each: what the reader may
// run, and where this suite runs it.
const (
	// markRun: run, in the page's order, against a fresh `switchboard dev` (TestDocsRun).
	markRun = "run: dev"
	// markOutput: what the run block just above prints, ids, times and keys aside.
	markOutput = "output"
	// markNeeds prefixes what a block needs that this suite lacks: "needs: cluster (…)",
	// "needs: internet (…)".
	markNeeds = "needs: "
	// markIllustrative prefixes a block shown but not run, and why.
	markIllustrative = "illustrative"
)

// shellLangs are the fence languages of commands: each such block must say whether it runs.
var shellLangs = []string{"sh", "bash", "shell", "console", "zsh"}

// commandLine is a line of a non-shell block that looks like a command a reader would copy.
var commandLine = regexp.MustCompile(`^(\$ |(kubectl|curl|helm|make|docker|kustomize|switchboard|bin/switchboard) )`)

// mdBlock is one fenced block of a page.
type mdBlock struct {
	file, marker, lang, body string
	line                     int // of the opening fence
}

var (
	openFence = regexp.MustCompile("^( *)```([A-Za-z0-9_-]*)\\s*$")
	markerRe  = regexp.MustCompile(`^ *<!-- (.+?) -->\s*$`)
)

// mdBlocks splits a page into its fenced blocks (indented ones in lists too), each with the
// marker comment of the line right above its opening fence.
func mdBlocks(file, text string) ([]mdBlock, error) {
	lines := strings.Split(text, "\n")
	var blocks []mdBlock
	for i := 0; i < len(lines); i++ {
		m := openFence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := mdBlock{file: file, lang: m[2], line: i + 1}
		if i > 0 {
			if mm := markerRe.FindStringSubmatch(lines[i-1]); mm != nil {
				b.marker = mm[1]
			}
		}
		end := slices.IndexFunc(lines[i+1:], func(l string) bool { return strings.TrimRight(l, " ") == m[1]+"```" })
		if end < 0 {
			return nil, fmt.Errorf("%s line %d: the block is not closed", file, i+1)
		}
		var body strings.Builder
		for _, l := range lines[i+1 : i+1+end] {
			body.WriteString(strings.TrimPrefix(l, m[1]) + "\n")
		}
		b.body = body.String()
		blocks = append(blocks, b)
		i += end + 1
	}
	return blocks, nil
}

// checkMarkers says what is wrong with a page's markers: a shell block that does not say
// whether it runs, a command in a block of another language, an unknown marker, or an output
// block that follows no run block.
func checkMarkers(blocks []mdBlock) []string {
	var problems []string
	for i, b := range blocks {
		where := fmt.Sprintf("%s line %d", b.file, b.line)
		shell := slices.Contains(shellLangs, b.lang)
		known := b.marker == "" || b.marker == markRun || b.marker == markOutput ||
			strings.HasPrefix(b.marker, markNeeds) || strings.HasPrefix(b.marker, markIllustrative) ||
			strings.HasPrefix(b.marker, "example: ") || b.marker == "chart values" // docs/gateways.md's, checked by test/gateways
		switch {
		case !known:
			problems = append(problems, fmt.Sprintf("%s: unknown marker <!-- %s -->", where, b.marker))
		case shell && (b.marker == "" || b.marker == markOutput):
			problems = append(problems, fmt.Sprintf("%s: a %s block needs a marker: <!-- %s -->, <!-- %s… -->, or <!-- %s: why -->", where, b.lang, markRun, markNeeds, markIllustrative))
		case !shell && b.marker == markRun:
			problems = append(problems, fmt.Sprintf("%s: only a shell block runs (this one is %q)", where, b.lang))
		case b.marker == markOutput && (i == 0 || blocks[i-1].marker != markRun):
			problems = append(problems, fmt.Sprintf("%s: an output block must follow a <!-- %s --> block", where, markRun))
		}
		if !shell {
			for n, l := range strings.Split(b.body, "\n") {
				if commandLine.MatchString(l) {
					problems = append(problems, fmt.Sprintf("%s: line %d looks like a command (%q): put commands in a marked sh block", where, b.line+1+n, l))
				}
			}
		}
	}
	return problems
}

// docPages are the README and every page of docs/, as paths from the repository's root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		out = append(out, filepath.Join("docs", filepath.Base(p)))
	}
	return out
}

func pageBlocks(t *testing.T, page string) []mdBlock {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(), page))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := mdBlocks(page, string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// TestDocsBlocksAreMarked: every shell block of the README and docs/ says whether it runs here
// (and TestDocsRun runs those that do), so a command added without a marker fails here.
func TestDocsBlocksAreMarked(t *testing.T) {
	var runnable int
	for _, page := range docPages(t) {
		blocks := pageBlocks(t, page)
		for _, p := range checkMarkers(blocks) {
			t.Error(p)
		}
		for _, b := range blocks {
			if b.marker == markRun {
				runnable++
			}
		}
	}
	if runnable == 0 {
		t.Error("no page has a block marked <!-- run: dev -->")
	}
}

func TestCheckMarkers(t *testing.T) {
	for _, tc := range []struct {
		name, page string
		want       []string // a part of each problem, in order
	}{
		{"marked blocks", "<!-- run: dev -->\n```sh\ncurl x\n```\n<!-- output -->\n```json\n{}\n```\n<!-- needs: internet (a registry) -->\n```sh\ndocker push x\n```\n<!-- illustrative: a sketch -->\n```bash\nmake x\n```\n", nil},
		{"an unmarked sh block", "text\n\n```sh\nkubectl get apikeys\n```\n", []string{"line 3: a sh block needs a marker"}},
		{"an unmarked indented console block", "- item\n\n  ```console\n  kubectl get apikeys\n  ```\n", []string{"line 3: a console block needs a marker"}},
		{"a marker not on the line above", "<!-- run: dev -->\n\n```sh\ncurl x\n```\n", []string{"line 3: a sh block needs a marker"}},
		{"an unknown marker", "<!-- runs -->\n```sh\ncurl x\n```\n", []string{"unknown marker <!-- runs -->"}},
		{"a command in a text block", "```text\n$ curl -si x\nRatelimit: r=1\n```\n", []string{`line 2 looks like a command ("$ curl -si x")`}},
		{"a command in an unlabelled block", "```\nkubectl apply -f x\n```\n", []string{"line 2 looks like a command"}},
		{"an output marker on a shell block", "<!-- run: dev -->\n```sh\ncurl x\n```\n<!-- output -->\n```sh\n{}\n```\n", []string{"line 6: a sh block needs a marker"}},
		{"output after no run block", "<!-- illustrative -->\n```sh\ncurl x\n```\n<!-- output -->\n```json\n{}\n```\n", []string{"line 6: an output block must follow"}},
		{"a run marker on yaml", "<!-- run: dev -->\n```yaml\na: b\n```\n", []string{`only a shell block runs (this one is "yaml")`}},
		{"output text is not a command", "```text\nName:   worker\nNAME   HINT\n```\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blocks, err := mdBlocks("page.md", tc.page)
			if err != nil {
				t.Fatal(err)
			}
			got := checkMarkers(blocks)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %q, want it to contain %q", got[i], tc.want[i])
				}
			}
		})
	}
	if _, err := mdBlocks("page.md", "```sh\ncurl x\n"); err == nil || !strings.Contains(err.Error(), "line 1: the block is not closed") {
		t.Errorf("an unclosed block: %v, want the error naming its line", err)
	}
}

// normalizeOutput blanks what differs from run to run: Connection ids, times and keys; and
// drops carriage returns, which a terminal does not show (HTTP's header lines end in CRLF).
func normalizeOutput(s string) string {
	s = strings.ReplaceAll(s, "\r", "")
	for _, r := range []struct{ re, with string }{
		{`conn_[0-9a-z]+`, "conn_…"},
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`, "<time>"},
		{`sb_live_[0-9A-Za-z]+`, "sb_live_…"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return strings.TrimSpace(s)
}

// sameOutput says whether a block printed what its output block shows: the same text, ids,
// times and keys aside; for JSON, the same value up to the order of lists too, because
// Connections are listed by their id, which is random.
func sameOutput(got, want string) bool {
	var g, w any
	if json.Unmarshal([]byte(got), &g) == nil && json.Unmarshal([]byte(want), &w) == nil {
		return canonicalJSON(g) == canonicalJSON(w)
	}
	return normalizeOutput(got) == normalizeOutput(want)
}

// canonicalJSON encodes v with its strings normalized and each list sorted.
func canonicalJSON(v any) string {
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			return normalizeOutput(v)
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		case []any:
			keys := make([]string, len(v))
			for i, e := range v {
				keys[i] = canonicalJSON(e)
			}
			slices.Sort(keys)
			out := make([]any, len(keys))
			for i, k := range keys {
				out[i] = json.RawMessage(k)
			}
			return out
		}
		return v
	}
	b, err := json.Marshal(walk(v))
	if err != nil {
		panic(err) // decoded JSON encodes
	}
	return string(b)
}

func TestSameOutput(t *testing.T) {
	for _, tc := range []struct {
		got, want string
		same      bool
	}{
		{`{"connections":[{"id":"conn_b","name":"crm"},{"id":"conn_a","name":"warehouse"}]}`, `{"connections":[{"id":"conn_x","name":"warehouse"},{"id":"conn_y","name":"crm"}]}` + "\n", true},
		{`{"connections":[{"id":"conn_b","name":"crm"}]}`, `{"connections":[{"id":"conn_x","name":"warehouse"}]}`, false},
		{`{"connections":[{"name":"crm"}]}`, `{"connections":[{"name":"crm"},{"name":"crm"}]}`, false},
		{`{"error":{"code":"API_KEY_INVALID"}}`, `{"error":{"code":"API_KEY_MISSING"}}`, false},
		{"Ratelimit: r=19\r\n", "Ratelimit: r=19\n", true},
		{"Ratelimit: r=18\r\n", "Ratelimit: r=19\n", false},
	} {
		if got := sameOutput(tc.got, tc.want); got != tc.same {
			t.Errorf("sameOutput(%q, %q) = %v, want %v", tc.got, tc.want, got, tc.same)
		}
	}
}

func TestNormalizeOutput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"id":"conn_wxfgox5gyeulanieuayp","created_at":"2026-11-27T17:05:45Z"}` + "\n", `{"id":"conn_…","created_at":"<time>"}`},
		{"key sb_live_2zmraztBWSR7IZjHKKcZuEXjLYJT0DzswqOTtL8k7Qp0O9ngw at 2026-11-27T17:05:45.123Z", "key sb_live_… at <time>"},
		{`Ratelimit: "apikey";r=19;t=1`, `Ratelimit: "apikey";r=19;t=1`},
		{"  two\nlines  \n\n", "two\nlines"},
		{"Ratelimit: \"apikey\";r=19;t=1\r\nRatelimit-Policy: \"apikey\";q=100\r\n", "Ratelimit: \"apikey\";r=19;t=1\nRatelimit-Policy: \"apikey\";q=100"},
	} {
		if got := normalizeOutput(tc.in); got != tc.want {
			t.Errorf("normalizeOutput(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// docsDevListen is where the docs say `make dev` serves /v1; the suite's dev listens on a free
// port instead, and this is the one thing of a block it rewrites.
const docsDevListen = "127.0.0.1:8080"

// TestDocsRun runs the blocks marked <!-- run: dev --> of each page, in order, as a reader
// would: against a fresh `switchboard dev` per page, in a copy of the repository's top level
// whose .switchboard/dev is that dev's state, in bash with `set -euo pipefail`, each block
// seeing the variables the blocks before it set. A block must succeed; a block followed by an
// <!-- output --> block must print that (ids, times, keys and the order of JSON lists aside), and is run again until it
// does, for a minute, as a reader's next try would (a revocation or a new key reaches the
// server in one watch event). Every page but the README starts from the README tour's first
// block, which sets up the shell the way the other pages expect it.
func TestDocsRun(t *testing.T) {
	readme := pageBlocks(t, "README.md")
	setup := slices.IndexFunc(readme, func(b mdBlock) bool { return b.marker == markRun })
	if setup < 0 {
		t.Fatal("README.md has no <!-- run: dev --> block to set the shell up")
	}
	for _, page := range docPages(t) {
		var blocks []mdBlock
		for _, b := range pageBlocks(t, page) {
			if b.marker == markRun || b.marker == markOutput {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		t.Run(page, func(t *testing.T) {
			if page != "README.md" {
				blocks = append([]mdBlock{readme[setup]}, blocks...)
			}
			s := startSystem(t)
			sh := newDocShell(t, s)
			for i, b := range blocks {
				if b.marker != markRun {
					continue
				}
				if i+1 < len(blocks) && blocks[i+1].marker == markOutput {
					sh.runUntil(t, b, blocks[i+1])
				} else {
					sh.run(t, b)
				}
			}
		})
	}
}

// docShell is a reader's terminal: a working directory and the environment the blocks so far
// left.
type docShell struct {
	s   *system
	dir string
	env []string
}

// newDocShell makes the reader's working directory: the repository's top level, linked, with
// .switchboard/dev (where `make dev` keeps its state) linked to this dev's state dir; and an
// environment without KUBECONFIG, whose HOME holds no kubeconfig.
func newDocShell(t *testing.T, s *system) *docShell {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(s.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".switchboard" || e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(s.root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".switchboard"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(s.stateDir, filepath.Join(dir, ".switchboard", "dev")); err != nil {
		t.Fatal(err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "HOME=")
	})
	return &docShell{s: s, dir: dir, env: append(env, "HOME="+t.TempDir())}
}

// exec runs one block in bash from the current environment, and returns what it printed and
// the environment it leaves.
func (sh *docShell) exec(t *testing.T, b mdBlock) (stdout, stderr string, env []string, err error) {
	t.Helper()
	envFile := filepath.Join(t.TempDir(), "env")
	body := strings.ReplaceAll(b.body, docsDevListen, strings.TrimPrefix(sh.s.baseURL, "http://"))
	script := "set -a\nset -euo pipefail\n" + body + "\nenv -0 > " + envFile + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = sh.dir, sh.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), nil, err
	}
	raw, err := os.ReadFile(envFile)
	if err != nil {
		return out.String(), errOut.String(), nil, err
	}
	for _, kv := range strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00") {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains([]string{"PWD", "OLDPWD", "SHLVL", "_"}, name) {
			env = append(env, kv)
		}
	}
	return out.String(), errOut.String(), env, nil
}

// run runs a block once; it must succeed.
func (sh *docShell) run(t *testing.T, b mdBlock) {
	t.Helper()
	stdout, stderr, env, err := sh.exec(t, b)
	if err != nil {
		t.Fatalf("%s line %d failed (%v):\n%s\nstdout:\n%s\nstderr:\n%s", b.file, b.line, err, b.body, redactKeys(stdout), redactKeys(stderr))
	}
	sh.env = env
}

// runUntil runs a block until it prints what the output block shows, for a minute.
func (sh *docShell) runUntil(t *testing.T, b, want mdBlock) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		stdout, stderr, env, err := sh.exec(t, b)
		if err == nil && sameOutput(stdout, want.body) {
			sh.env = env
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s line %d does not print what line %d shows, after a minute of tries (last: %v):\n%s\nstdout:\n%s\nwant:\n%s\nstderr:\n%s",
				b.file, b.line, want.line, err, b.body, redactKeys(stdout), want.body, redactKeys(stderr))
		}
		time.Sleep(2 * time.Second)
	}
}

// redactKeys keeps keys out of the test's log when a block fails.
func redactKeys(s string) string {
	return regexp.MustCompile(`sb_live_[0-9A-Za-z]+`).ReplaceAllStringFunc(s, func(k string) string { return k[:min(len(k), 12)] + "…" })
}
