//go:build e2e

// Package e2e runs the real binaries as a user would: `switchboard dev` as a separate process,
// kubectl, kubectl-switchboard and plain HTTP. Run it with `make test-e2e`.
package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

func TestEndToEnd(t *testing.T) {
	start := time.Now()
	s := startSystem(t)
	t.Logf("switchboard dev --fresh reached ready in %s", time.Since(start).Round(10*time.Millisecond))
	var issued []string // every key issued to the e2e user (the demo key is checked separately)

	t.Run("the demo key from the banner lists the demo connections", func(t *testing.T) {
		r := s.get(t, s.demoKey)
		names, _ := r.connections(t)
		if !equal(names, []string{"crm", "warehouse"}) {
			t.Fatalf("demo connections %v, want [crm warehouse]", names)
		}
		if !strings.Contains(string(r.body), `"connections":[{"id":"conn_`) {
			t.Errorf("each connection must begin with its id: %s", r.body)
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
	})

	t.Run("kubectl apply -k config/samples/ and reveal the sample key", func(t *testing.T) {
		// -k: config/samples holds a kustomization.yaml, which `apply -f` would send as an object.
		s.kubectl(t, "apply", "-k", "config/samples/")
		key := s.pluginKey(t, "key", "reveal", "ci", "-n", "demo", "-o", "json")
		issued = append(issued, key)
		// The sample key selects team=data: the sample warehouse, not the seeded crm.
		testenv.Eventually(t, 30*time.Second, "the sample key lists the team=data connections", func() error {
			r := s.get(t, key)
			if r.status != http.StatusOK {
				return fmt.Errorf("status %d: %s", r.status, r.body)
			}
			if names, _ := r.connections(t); !equal(names, []string{"warehouse"}) {
				return fmt.Errorf("listed %v, want [warehouse]", names)
			}
			return nil
		})
		if _, err := s.run(t, s.bin("kubectl-switchboard"), "key", "reveal", "ci", "-n", "demo", "-o", "json"); err == nil {
			t.Fatal("a second reveal of the same key succeeded; a key is shown once")
		}
	})

	t.Run("renewal windows that cannot open in time are refused", func(t *testing.T) {
		// The dev API server calls the operator's admission webhook, as a cluster does.
		key := func(renewBefore string) string {
			f := filepath.Join(t.TempDir(), "key.yaml")
			doc := "apiVersion: switchboard.dev/v1alpha1\nkind: APIKey\nmetadata: {name: windows, namespace: demo}\n" +
				"spec:\n  secretName: windows-key\n  lifetime: 720h\n  renewBefore: " + renewBefore + "\n" +
				"  renewalWindows:\n    - {cron: \"0 2 * * 1-5\", duration: 1h, timeZone: Europe/Paris}\n"
			if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			return f
		}
		// The webhook follows the windows from the real now: every weekend leaves a gap of at
		// least 2 days 23h ahead, whatever the day, and the longest is 3 days (the clocks go back).
		if _, err := s.run(t, s.kubectlBin(), "apply", "-f", key("48h")); err == nil || !strings.Contains(err.Error(), "no renewal window opens between") ||
			!strings.Contains(err.Error(), "renewal period (2 days)") {
			t.Fatalf("a weekday window under a 48h renewal period: %v, want the webhook's refusal", err)
		}
		s.kubectl(t, "apply", "-f", key("96h"))
		s.kubectl(t, "delete", "apikey", "windows", "-n", "demo")
	})

	var demoKey2, otherKey string
	t.Run("a key sees its own namespace only", func(t *testing.T) {
		s.kubectl(t, "create", "namespace", "other")
		conn := filepath.Join(t.TempDir(), "billing.yaml")
		if err := os.WriteFile(conn, []byte("apiVersion: switchboard.dev/v1alpha1\nkind: Connection\nmetadata: {name: billing, namespace: other}\nspec: {displayName: Billing, provider: stripe}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s.kubectl(t, "apply", "-f", conn)
		demoKey2 = s.pluginKey(t, "key", "create", "e2e", "-n", "demo", "--description", "end-to-end", "-o", "json")
		otherKey = s.pluginKey(t, "key", "create", "other-key", "-n", "other", "-o", "json")
		issued = append(issued, demoKey2, otherKey)
		testenv.Eventually(t, 30*time.Second, "each key lists its namespace's connections", func() error {
			demo, _ := s.get(t, demoKey2).connections(t)
			other, _ := s.get(t, otherKey).connections(t)
			if !equal(demo, []string{"crm", "warehouse"}) || !equal(other, []string{"billing"}) {
				return fmt.Errorf("demo key lists %v, other key lists %v", demo, other)
			}
			return nil
		})
	})

	t.Run("every status and code of the contract", func(t *testing.T) {
		key := demoKey2
		get := func(auth string) response { return s.call(t, http.MethodGet, "/v1/connections", auth) }
		get("").expectError(t, "no Authorization", 401, "API_KEY_MISSING")
		get("Basic "+key).expectError(t, "another scheme", 401, "API_KEY_MISSING")
		get("Bearer").expectError(t, "Bearer and nothing", 401, "API_KEY_MISSING")
		get("Bearer "+key+" "+key).expectError(t, "two tokens", 401, "API_KEY_MISSING")
		get("Bearer sb_live_unknown").expectError(t, "not a key", 401, "API_KEY_INVALID")
		mistyped := key[:len(key)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(key, "A")]
		get("Bearer "+mistyped).expectError(t, "checksum mismatch", 401, "API_KEY_INVALID")
		get("Bearer xx"+key[2:]).expectError(t, "another prefix", 401, "API_KEY_INVALID")
		if r := get("Bearer " + key); r.status != http.StatusOK {
			t.Fatalf("a valid key: %d %s", r.status, r.body)
		}
		s.call(t, http.MethodGet, "/v1/nothing-here", "Bearer "+key).expectError(t, "an unknown /v1 path", 404, "NOT_FOUND")
		r := s.call(t, http.MethodPost, "/v1/connections", "Bearer "+key)
		r.expectError(t, "POST", 405, "METHOD_NOT_ALLOWED")
		if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") {
			t.Errorf("405 without Allow: GET (%q)", allow)
		}
		s.call(t, http.MethodGet, "/v1/connections?limit=0", "Bearer "+key).expectError(t, "limit=0", 400, "INVALID_PARAMETER")

		// Paging: limit=1 and the Link header walk the two demo connections.
		var walked []string
		path := "/v1/connections?limit=1"
		for i := 0; path != "" && i < 5; i++ {
			r := s.call(t, http.MethodGet, path, "Bearer "+key)
			names, _ := r.connections(t)
			walked = append(walked, names...)
			path = nextLink(r.header.Get("Link"), s.baseURL)
		}
		if len(walked) != 2 || walked[0] == walked[1] {
			t.Errorf("paging with limit=1 walked %v, want both demo connections once", walked)
		}
	})

	t.Run("revoke: 401 within a second", func(t *testing.T) {
		if r := s.get(t, demoKey2); r.status != http.StatusOK {
			t.Fatalf("before revoke: %d", r.status)
		}
		if _, err := s.run(t, s.bin("kubectl-switchboard"), "key", "revoke", "e2e", "-n", "demo", "--yes"); err != nil {
			t.Fatal(err)
		}
		revokedAt := time.Now()
		testenv.Eventually(t, time.Second, "the revoked key is refused", func() error {
			if r := s.get(t, demoKey2); r.status != http.StatusUnauthorized {
				return fmt.Errorf("status %d", r.status)
			}
			return nil
		})
		t.Logf("revoked key refused %s after kubectl switchboard key revoke returned", time.Since(revokedAt).Round(time.Millisecond))
		s.get(t, demoKey2).expectError(t, "a revoked key", 401, "API_KEY_INVALID")
		// Other keys of the namespace are untouched.
		if r := s.get(t, s.demoKey); r.status != http.StatusOK {
			t.Fatalf("the demo key stopped working with another key's revocation: %d", r.status)
		}
	})

	t.Run("rotate with a grace period: both keys, then only the new one", func(t *testing.T) {
		old := s.pluginKey(t, "key", "create", "rot", "-n", "demo", "-o", "json")
		issued = append(issued, old)
		// The operator starts the grace when it rotates, a moment before the plugin returns the new
		// key; slack covers that moment on a busy machine.
		const grace, slack = 6 * time.Second, 2500 * time.Millisecond
		fresh := s.pluginKey(t, "key", "rotate", "rot", "-n", "demo", "--grace", grace.String(), "-o", "json")
		rotatedAt := time.Now()
		issued = append(issued, fresh)
		if fresh == old {
			t.Fatal("rotation returned the same key")
		}
		testenv.Eventually(t, 5*time.Second, "the new key works", func() error {
			if r := s.get(t, fresh); r.status != http.StatusOK {
				return fmt.Errorf("status %d", r.status)
			}
			return nil
		})
		if time.Since(rotatedAt) < grace-slack {
			if r := s.get(t, old); r.status != http.StatusOK {
				t.Fatalf("the old key stopped inside its grace period: %d %s", r.status, r.body)
			}
		}
		testenv.Eventually(t, grace+10*time.Second, "the old key is refused after the grace", func() error {
			if r := s.get(t, old); r.status != http.StatusUnauthorized {
				return fmt.Errorf("status %d", r.status)
			}
			return nil
		})
		if time.Since(rotatedAt) < grace-slack {
			t.Fatalf("the old key was refused after %s, before its %s grace", time.Since(rotatedAt), grace)
		}
		s.get(t, old).expectError(t, "the replaced key", 401, "API_KEY_INVALID")
		if r := s.get(t, fresh); r.status != http.StatusOK {
			t.Fatalf("the new key after the grace: %d", r.status)
		}
	})

	// Last, because it blocks this address's failed authentications for a while.
	t.Run("repeated failures are rate limited", func(t *testing.T) {
		for i := 0; i < 200; i++ {
			r := s.call(t, http.MethodGet, "/v1/connections", "Bearer sb_live_wrong")
			if r.status == http.StatusTooManyRequests {
				r.expectError(t, "too many failures", 429, "RATE_LIMITED")
				if r.header.Get("Retry-After") == "" {
					t.Error("429 without Retry-After")
				}
				return
			}
			if r.status != http.StatusUnauthorized {
				t.Fatalf("failure %d: status %d", i, r.status)
			}
		}
		t.Fatal("200 failed authentications in a row were never limited")
	})

	t.Run("no issued key appears in logs, Events or status", func(t *testing.T) {
		checkNoLeaks(t, s, issued)
	})

	t.Run("Ctrl-C stops everything", func(t *testing.T) {
		s.stop()
		if !strings.Contains(s.out.String(), "stopped kube-apiserver and etcd") {
			t.Errorf("dev did not say it stopped the control plane:\n%s", tail(s.out.String(), 10))
		}
		if strays := s.strays(); len(strays) > 0 {
			t.Fatalf("processes outlived switchboard dev:\n%s", strings.Join(strays, "\n"))
		}
		// The control plane's own logs are part of the run's logs too.
		checkLogFiles(t, s, append(issued, s.demoKey))
	})
	t.Run("a restart without --fresh keeps keys and objects", func(t *testing.T) {
		restartedAt := time.Now()
		again := restartSystem(t, s)
		t.Logf("switchboard dev (warm) reached ready in %s", time.Since(restartedAt).Round(10*time.Millisecond))
		out := again.out.String()
		if strings.Contains(out, s.demoKey) || !strings.Contains(out, "was shown when an earlier run created it") {
			t.Fatalf("a restart must not show the demo key again, only say it was shown:\n%s", tail(out, 12))
		}
		for key, want := range map[string][]string{s.demoKey: {"crm", "warehouse"}, otherKey: {"billing"}} {
			names, _ := again.get(t, key).connections(t)
			if !equal(names, want) {
				t.Errorf("after a restart a key lists %v, want %v", names, want)
			}
		}
		again.get(t, demoKey2).expectError(t, "a key revoked before the restart", 401, "API_KEY_INVALID")
		again.stop()
		if strays := again.strays(); len(strays) > 0 {
			t.Fatalf("processes outlived the restarted switchboard dev:\n%s", strings.Join(strays, "\n"))
		}
		checkLogFiles(t, again, append(issued, s.demoKey))
		if strings.Contains(again.out.String(), s.demoKey) {
			t.Fatal("the restarted dev printed the demo key")
		}
	})
	t.Logf("end-to-end run: %s", time.Since(start).Round(10*time.Millisecond))
}

// nextLink returns the path of the Link header's rel="next" URL, or "".
func nextLink(link, base string) string {
	for _, part := range strings.Split(link, ",") {
		if !strings.Contains(part, `rel="next"`) {
			continue
		}
		start, end := strings.Index(part, "<"), strings.Index(part, ">")
		if start < 0 || end < start {
			return ""
		}
		return strings.TrimPrefix(part[start+1:end], base)
	}
	return ""
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
