//go:build !unit

package plugin

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// labelledKey creates an APIKey with labels as kubectl apply would (delivered into secretName
// when it is not empty) and waits for the operator to issue its first key.
func labelledKey(t *testing.T, ns, name, secretName string, labels map[string]string) {
	t.Helper()
	k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: switchboardv1alpha1.APIKeySpec{SecretName: secretName}}
	if err := env.Client.Create(testContext(t), k); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the first key of "+name, func() error {
		if !meta.IsStatusConditionTrue(getAPIKey(t, ns, name).Status.Conditions, switchboardv1alpha1.ConditionReady) {
			return errNotYet
		}
		return nil
	})
}

func keyGeneration(t *testing.T, ns, name string) int64 {
	t.Helper()
	return getAPIKey(t, ns, name).Status.KeyGeneration
}

func TestBulkRotateBySelector(t *testing.T) {
	ns := env.Namespace(t, "bulk")
	labelledKey(t, ns, "api", "", map[string]string{"app": "shop"})
	labelledKey(t, ns, "worker", "worker-key", map[string]string{"app": "shop", "tier": "batch"})
	labelledKey(t, ns, "other", "", map[string]string{"app": "crm"})
	labelledKey(t, ns, "old", "", map[string]string{"app": "shop", "retired": "yes"})
	mustSucceed(t, admin(t, ns, "key", "revoke", "old", "--yes"))

	// Answering no changes nothing; the question lists the keys and what happens to them.
	r := run(t, env.Config, ns, "n\n", "key", "rotate", "-l", "app=shop", "--timeout", "30s")
	mustFail(t, r, "not confirmed: no APIKey was rotated (answer y, or pass --yes)")
	for _, want := range []string{
		`Rotate 2 APIKeys in namespace "` + ns + `": api, worker?`,
		"Their previous keys stop working at once (no --grace)",
		"1 of them has no delivery Secret, so its new key is printed here, once",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the question lacks %q: %q", want, r.stderr)
		}
	}
	r = run(t, env.Config, ns, "\n", "key", "rotate", "-l", "tier=batch", "--grace", "24h")
	mustFail(t, r, "not confirmed")
	if want := `Rotate 1 APIKey in namespace "` + ns + `": worker? Its previous key keeps working for 24h0m0s. [y/N]: `; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("the question for one key: %q, want %q", r.stderr, want)
	}
	for _, name := range []string{"api", "worker"} {
		if g := keyGeneration(t, ns, name); g != 1 {
			t.Fatalf("%s was rotated without confirmation (generation %d)", name, g)
		}
	}

	// Answering yes rotates both, skips the revoked one, leaves the others alone.
	r = run(t, env.Config, ns, "y\n", "key", "rotate", "-l", "app=shop", "--grace", "1h", "--timeout", "30s")
	mustSucceed(t, r)
	if !strings.Contains(r.stderr, "Their previous keys keep working for 1h0m0s") {
		t.Errorf("the question does not name the grace: %q", r.stderr)
	}
	m := regexp.MustCompile(`APIKey "api" in namespace "` + ns + `" rotated \(hint [^)]+\)\. The previous key keeps working until \S+\. New key: (\S+)\n`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no line with api's new key:\n%s", r.stdout)
	}
	checkKeyMatchesHash(t, ns, "api", m[1])
	eventuallyStatus(t, m[1], http.StatusOK)
	for _, want := range []string{
		`APIKey "worker" rotated (hint ` + getAPIKey(t, ns, "worker").Status.KeyHint + `); its key is in Secret "worker-key" of namespace "` + ns + `"`,
		`Rotated 2 of the 2 APIKeys picked in namespace "` + ns + `" (1 into its delivery Secret, 1 printed above, once); 0 failed; skipped 1: old (revoked).`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "Warning: the new keys printed above will not be shown again") || strings.Contains(r.stderr, m[1]) {
		t.Errorf("stderr: %q", r.stderr)
	}
	for name, want := range map[string]int64{"api": 2, "worker": 2, "other": 1, "old": 1} {
		if g := keyGeneration(t, ns, name); g != want {
			t.Errorf("%s: key generation %d, want %d", name, g, want)
		}
	}

	// A selector that picks nothing, or only revoked keys, rotates nothing and says so.
	r = admin(t, ns, "key", "rotate", "-l", "app=none", "--yes")
	mustSucceed(t, r)
	if want := `Nothing to rotate: no APIKey in namespace "` + ns + `" has labels "app=none".`; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q lacks %q", r.stderr, want)
	}
	r = admin(t, ns, "key", "rotate", "-l", "retired=yes", "--yes")
	mustSucceed(t, r)
	if want := `Nothing to rotate in namespace "` + ns + `": every APIKey picked is revoked, expired or being deleted: old (revoked).`; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q lacks %q", r.stderr, want)
	}
	mustFail(t, admin(t, ns, "key", "rotate", "-l", "app in (", "--yes"), `-l "app in (" is not a label selector`)

	// Whoever may list keys but not rotate them gets each refusal and a failure at the end.
	reader := serviceAccountConfig(t, ns, "reader", []rbacv1.PolicyRule{
		rule(switchboardv1alpha1.GroupVersion.Group, []string{"apikeys"}, "get", "list"),
	})
	r = run(t, reader, ns, "", "key", "rotate", "--all", "--yes", "--timeout", "30s")
	if r.code == 0 {
		t.Fatalf("a forbidden bulk rotation succeeded:\n%s", r.stdout)
	}
	for _, want := range []string{
		`error: APIKey api: forbidden: you (system:serviceaccount:` + ns + `:reader) may not patch apikeys.switchboard.dev`,
		`error: APIKey worker: forbidden`, `error: APIKey other: forbidden`,
		`error: 3 of the 3 APIKeys picked could not be rotated (see above)`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "Rotated 0 of the 3 APIKeys picked") {
		t.Errorf("stdout: %q", r.stdout)
	}
}

func TestBulkRotateAllNamespacesJSON(t *testing.T) {
	ns1, ns2 := env.Namespace(t, "bulk-a"), env.Namespace(t, "bulk-b")
	suite := map[string]string{"suite": ns1}
	labelledKey(t, ns1, "api", "", suite)
	labelledKey(t, ns2, "worker", "worker-key", suite)
	labelledKey(t, ns1, "unlabelled", "", nil)

	r := admin(t, ns1, "key", "rotate", "-A", "-l", "suite="+ns1, "--yes", "-o", "json", "--timeout", "30s")
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one JSON line per key, got:\n%s", r.stdout)
	}
	var revealed keyResult
	if err := json.Unmarshal([]byte(lines[0]), &revealed); err != nil || revealed.Namespace != ns1 || revealed.Name != "api" || revealed.Key == "" {
		t.Fatalf("first line %q: %v", lines[0], err)
	}
	checkKeyMatchesHash(t, ns1, "api", revealed.Key)
	var delivered deliveredResult
	if err := json.Unmarshal([]byte(lines[1]), &delivered); err != nil || delivered.Namespace != ns2 || delivered.SecretName != "worker-key" {
		t.Fatalf("second line %q: %v", lines[1], err)
	}
	if want := "Rotated 2 of the 2 APIKeys picked in any namespace (1 into its delivery Secret, 1 printed above, once); 0 failed."; !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q lacks %q", r.stderr, want)
	}
	if g := keyGeneration(t, ns1, "unlabelled"); g != 1 {
		t.Fatalf("a key the selector did not pick was rotated (generation %d)", g)
	}

	// --all: every key of the namespace, none of another.
	r = admin(t, ns1, "key", "rotate", "--all", "--yes", "--timeout", "30s")
	mustSucceed(t, r)
	for name, want := range map[string]int64{"api": 3, "unlabelled": 2} {
		if g := keyGeneration(t, ns1, name); g != want {
			t.Errorf("%s: key generation %d, want %d", name, g, want)
		}
	}
	var worker switchboardv1alpha1.APIKey
	if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns2, Name: "worker"}, &worker); err != nil || worker.Status.KeyGeneration != 2 {
		t.Fatalf("--all without -A reached another namespace: %v %d", err, worker.Status.KeyGeneration)
	}
}
