//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkNoLeaks looks for every issued key in every log line of the run, in every Event and in
// every APIKey (status, annotations, everything kubectl shows). The demo key may appear only in
// the two banner lines that show it to the person who ran dev.
func checkNoLeaks(t *testing.T, s *system, issued []string) {
	t.Helper()
	places := map[string]string{
		"the output of switchboard dev": withoutBanner(s.out.String(), s.bannerKeys),
		"kubectl and plugin stderr":     s.pluginErrs.String(),
		"Events (core/v1)":              s.kubectl(t, "get", "events", "--all-namespaces", "-o", "json"),
		"Events (events.k8s.io)":        s.kubectl(t, "get", "events.v1.events.k8s.io", "--all-namespaces", "-o", "json"),
		"APIKeys":                       s.kubectl(t, "get", "apikeys", "--all-namespaces", "-o", "json"),
		"Connections":                   s.kubectl(t, "get", "connections", "--all-namespaces", "-o", "json"),
	}
	if !strings.Contains(places["APIKeys"], `"keyHint"`) {
		t.Fatalf("the APIKey listing has no key hints; is it the real listing?\n%.500s", places["APIKeys"])
	}
	keys := append([]string{s.demoKey}, issued...)
	for where, text := range places {
		for _, key := range keys {
			if strings.Contains(text, key) || strings.Contains(text, key[len(key)-20:]) {
				t.Errorf("an issued key (hint %s) appears in %s", key[:12]+"…", where)
			}
		}
	}
	if n := strings.Count(s.out.String(), s.demoKey); n != 2 {
		t.Errorf("the demo key appears %d times in dev's output, want exactly twice (the banner's key and curl lines)", n)
	}
}

// checkLogFiles scans the control plane's log files in the state dir.
func checkLogFiles(t *testing.T, s *system, keys []string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(s.stateDir, "logs", "*.log"))
	if len(files) == 0 {
		t.Fatalf("no control-plane logs in %s/logs", s.stateDir)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range keys {
			if strings.Contains(string(b), key) || strings.Contains(string(b), key[len(key)-20:]) {
				t.Errorf("an issued key (hint %s) appears in %s", key[:12]+"…", f)
			}
		}
	}
}

// withoutBanner drops the lines that show the demo key on purpose.
func withoutBanner(out string, banner []string) string {
	for _, line := range banner {
		out = strings.Replace(out, line, "", 1)
	}
	return out
}
