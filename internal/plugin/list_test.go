//go:build !unit

package plugin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

func TestKeyList(t *testing.T) {
	ns := env.Namespace(t, "list")
	r := admin(t, ns, "key", "list")
	mustSucceed(t, r)
	if r.stdout != "" || !strings.Contains(r.stderr, "No API keys found") {
		t.Fatalf("empty list: stdout %q stderr %q", r.stdout, r.stderr)
	}

	created := admin(t, ns, "key", "create", "alpha", "--expires-in", "720h", "--timeout", "30s")
	mustSucceed(t, created)
	mustSucceed(t, admin(t, ns, "key", "create", "beta", "--timeout", "30s"))
	mustSucceed(t, admin(t, ns, "key", "revoke", "beta", "--yes"))

	r = admin(t, ns, "key", "list")
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows, got %q", r.stdout)
	}
	// RATE LIMIT, SOURCES and AUDIENCES were added with per-key policies (policy_test.go checks them).
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME HINT STATE CREATED LAST USED EXPIRES RATE LIMIT SOURCES AUDIENCES" {
		t.Fatalf("header = %q", lines[0])
	}
	alpha, beta := getAPIKey(t, ns, "alpha"), getAPIKey(t, ns, "beta")
	wantRow := func(line string, k *switchboardv1alpha1.APIKey, state, expires string) {
		t.Helper()
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != k.Name || f[1] != k.Status.KeyHint || f[2] != state || !strings.Contains(line, "never") ||
			!strings.Contains(line, expires) {
			t.Fatalf("row %q, want %s %s %s … %s", line, k.Name, k.Status.KeyHint, state, expires)
		}
	}
	wantRow(lines[1], alpha, string(keyclient.StateActive), "in 29d")
	wantRow(lines[2], beta, string(keyclient.StateRevoked), "never")

	// Once the key authenticates a request, the API server records it and LAST USED says when.
	eventuallyStatus(t, strings.TrimSpace(created.stdout), http.StatusOK)
	err := wait.PollUntilContextTimeout(testContext(t), 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		r = admin(t, ns, "key", "list")
		alphaRow := strings.Split(r.stdout, "\n")[1]
		return r.code == 0 && strings.Count(alphaRow, " ago") == 2 && !strings.Contains(alphaRow, "never"), nil
	})
	if err != nil {
		t.Fatalf("LAST USED never showed the use of the key: %q", r.stdout)
	}

	r = admin(t, ns, "key", "list", "-o", "json")
	mustSucceed(t, r)
	var list switchboardv1alpha1.APIKeyList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "APIKeyList" || len(list.Items) != 2 || list.Items[0].Kind != "APIKey" || list.Items[0].ManagedFields != nil {
		t.Fatalf("-o json: kind %q, %d items, item kind %q", list.Kind, len(list.Items), list.Items[0].Kind)
	}
	r = admin(t, ns, "key", "list", "-o", "yaml")
	mustSucceed(t, r)
	var fromYAML switchboardv1alpha1.APIKeyList
	if err := yaml.Unmarshal([]byte(r.stdout), &fromYAML); err != nil || len(fromYAML.Items) != 2 || fromYAML.Items[1].Spec.Revoked != true {
		t.Fatalf("-o yaml: %v %q", err, r.stdout)
	}
}

func TestConnectionList(t *testing.T) {
	ns := env.Namespace(t, "conns")
	conn := &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warehouse"},
		Spec:       switchboardv1alpha1.ConnectionSpec{DisplayName: "Warehouse", Provider: "postgres"},
	}
	if err := env.Client.Create(testContext(t), conn); err != nil {
		t.Fatal(err)
	}
	var id string
	err := wait.PollUntilContextTimeout(testContext(t), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var got switchboardv1alpha1.Connection
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "warehouse"}, &got); err != nil {
			return false, err
		}
		id = got.Status.ID
		return id != "", nil
	})
	if err != nil {
		t.Fatalf("the operator gave the Connection no id: %v", err)
	}
	// The table may be read before Ready is written with the id; wait for the row to settle.
	var r result
	_ = wait.PollUntilContextTimeout(testContext(t), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		r = admin(t, ns, "connection", "list")
		return strings.Contains(r.stdout, "True"), nil
	})
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ID PROVIDER READY AGE" {
		t.Fatalf("table: %q", r.stdout)
	}
	if f := strings.Fields(lines[1]); len(f) != 5 || f[0] != "warehouse" || f[1] != id || f[2] != "postgres" || f[3] != "True" {
		t.Fatalf("row: %q (id %s)", lines[1], id)
	}
	r = admin(t, ns, "conn", "list", "-o", "json")
	mustSucceed(t, r)
	var list switchboardv1alpha1.ConnectionList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Items) != 1 || list.Items[0].Status.ID != id {
		t.Fatalf("-o json: %v %q", err, r.stdout)
	}
}
