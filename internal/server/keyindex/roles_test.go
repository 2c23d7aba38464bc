package keyindex

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
)

// TestRoles: a key's permissions are its own, then its roles'; a role's change, arrival or
// deletion publishes again the keys naming it (a new Key each time), and only those; a missing
// role refuses everything; own rules that do not compile are not joined to a role's.
func TestRoles(t *testing.T) {
	x := New()
	naming := func(uid types.UID, own []switchboardv1alpha1.PermissionRule, roles ...string) {
		t.Helper()
		_ = putAPIKey(x, apiKey(uid, func(k *switchboardv1alpha1.APIKey) { k.Spec.Permissions, k.Spec.PermissionRoles = own, roles }))
	}
	key := func(uid types.UID) *Key {
		for _, k := range x.Keys() {
			if k.UID == uid {
				return k
			}
		}
		t.Fatalf("no key %s", uid)
		return nil
	}
	refusal := func(uid types.UID, method string) string {
		d := key(uid).Permissions.Decide(permission.Request{Method: method, Path: "/v1/connections"})
		if d.Allowed {
			return ""
		}
		return d.Refusal(method, "/v1/connections")
	}
	role := func(name string, rules ...switchboardv1alpha1.PermissionRule) {
		t.Helper()
		rs, err := permission.CompileRole(name, rules)
		if err != nil {
			t.Fatal(err)
		}
		x.PutRole("tenant", name, rs)
	}
	allowAll := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow}
	denyPost := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, Methods: []switchboardv1alpha1.HTTPMethod{"POST"}}

	naming("k1", []switchboardv1alpha1.PermissionRule{denyPost}, "reader")
	naming("k2", nil)
	if got := refusal("k1", "GET"); got != "permissions role reader does not exist" {
		t.Errorf("before the role: %q", got)
	}
	role("reader", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Methods: []switchboardv1alpha1.HTTPMethod{"GET"}})
	before := key("k1")
	if got := refusal("k1", "GET"); got != "" {
		t.Errorf("GET with the role: %q", got)
	}
	if got := refusal("k1", "POST"); got != "refused by permissions rule 0 (deny POST *)" {
		t.Errorf("POST, own rule first: %q", got)
	}
	role("reader", denyPost, allowAll)
	if key("k1") == before {
		t.Error("a role's change modified the published Key instead of replacing it")
	}
	if got := refusal("k1", "PUT"); got != "" {
		t.Errorf("PUT after the role allows all: %q", got)
	}
	naming("k1", nil, "reader")
	if got := refusal("k1", "POST"); got != "refused by rule 0 of role reader (deny POST *)" {
		t.Errorf("POST by the role's rule: %q", got)
	}
	if key("k2").Permissions != nil {
		t.Error("a key naming no role got permissions")
	}
	x.DeleteRole("tenant", "reader")
	if got := refusal("k1", "GET"); got != "permissions role reader does not exist" {
		t.Errorf("after the role's deletion: %q", got)
	}
	// Own rules that do not compile allow nothing, whatever the roles allow.
	role("reader", allowAll)
	naming("k1", []switchboardv1alpha1.PermissionRule{{Effect: "Maybe"}}, "reader")
	if got := refusal("k1", "GET"); got != "no permissions rule allows GET /v1/connections" {
		t.Errorf("own rules that do not compile: %q", got)
	}
	// A deleted key is no longer republished, and the index forgets it names the role.
	naming("k1", nil, "reader")
	x.DeleteAPIKey("k1")
	role("reader", denyPost)
	if len(x.Keys()) != 1 || len(x.roles.keys) != 0 {
		t.Errorf("after the key's deletion: %d keys, %d roles named", len(x.Keys()), len(x.roles.keys))
	}
}
