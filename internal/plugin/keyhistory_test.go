//go:build !unit

package plugin

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestKeyHistory: a key delivered, then rotated, has its life in `key history`, oldest first,
// from the operator's read-only copy, which a tenant who may only read reads; as JSON too.
func TestKeyHistory(t *testing.T) {
	ns := env.Namespace(t, "history")
	mustSucceed(t, admin(t, ns, "key", "create", "ci", "--secret-name", "ci-key"))
	waitForKey(t, env.Client, ns, "ci", "key generation 1", func(k *switchboardv1alpha1.APIKey) bool { return k.Status.KeyGeneration == 1 })
	mustSucceed(t, admin(t, ns, "key", "rotate", "ci"))
	k := waitForKey(t, env.Client, ns, "ci", "key generation 2", func(k *switchboardv1alpha1.APIKey) bool { return k.Status.KeyGeneration == 2 })
	want := []string{"apikey.created 1", "apikey.revealed 1", "apikey.rotated 2", "apikey.revealed 2"}

	// A tenant who may read APIKeys and their histories, and nothing else.
	reader := serviceAccountConfig(t, ns, "reader", []rbacv1.PolicyRule{rule(switchboardv1alpha1.GroupVersion.Group, []string{"apikeys", "apikeyhistories"}, "get")})
	var report keyHistory
	testenv.Eventually(t, 30*time.Second, "the history lists the rotation", func() error {
		r := run(t, reader, ns, "", "key", "history", "ci", "-o", "json")
		if r.code != 0 {
			return fmt.Errorf("exit %d: %s", r.code, r.stderr)
		}
		report = keyHistory{}
		if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
			return err
		}
		var got []string
		for _, e := range report.Events {
			got = append(got, e.Type+" "+strconv.FormatInt(e.Generation, 10))
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("events %v, want %v", got, want)
		}
		return nil
	})
	if report.Name != "ci" || report.Namespace != ns || report.Events[2].Hint != k.Status.KeyHint || report.Events[2].Time.IsZero() {
		t.Errorf("history: %+v", report)
	}

	r := run(t, reader, ns, "", "key", "history", "ci")
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[3], "rotated") || !strings.Contains(lines[3], k.Status.KeyHint) ||
		!strings.Contains(lines[1], "created") {
		t.Errorf("key history printed:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "sb_live_") && !strings.Contains(r.stdout, "…") {
		t.Errorf("key history printed something that is not a hint:\n%s", r.stdout)
	}

	// Tenants only read it: the copy is the operator's.
	cp := &switchboardv1alpha1.APIKeyHistory{}
	if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "ci"}, cp); err != nil {
		t.Fatal(err)
	}
	asReader, err := client.New(reader, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cp.Spec.Events = nil
	if err := asReader.Update(testContext(t), cp); err == nil {
		t.Error("a reader rewrote the key's history")
	}

	mustFail(t, run(t, reader, ns, "", "key", "history", "nope"), `APIKey "nope" not found`)
}
