package permission

import (
	"strings"
	"testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func mustCompileRole(t *testing.T, role string, specs ...switchboardv1alpha1.PermissionRule) *Rules {
	t.Helper()
	rs, err := CompileRole(role, specs)
	if err != nil {
		t.Fatalf("CompileRole: %v", err)
	}
	return rs
}

// TestJoinedRoles: a key's own rules come first, then each role's in the order joined; the
// first that matches decides, and its refusal and Where name its source and its index there.
func TestJoinedRoles(t *testing.T) {
	own := mustCompile(t, deny(methods("POST"), "/v1/**"))
	readOnly := mustCompileRole(t, "read-only", allow(methods("GET", "HEAD"), "/v1/connections/**"), deny(methods("DELETE"), "/v1/**"))
	everything := mustCompileRole(t, "everything", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow})
	rs := Join(own, nil, readOnly, everything)
	tests := []struct {
		method, path string
		allowed      bool
		where, msg   string
	}{
		{"POST", "/v1/connections", false, "0", "refused by permissions rule 0 (deny POST /v1/**)"},
		{"GET", "/v1/connections/c1", true, "0 of role read-only", ""},
		{"DELETE", "/v1/connections/c1", false, "1 of role read-only", "refused by rule 1 of role read-only (deny DELETE /v1/**)"},
		{"PUT", "/v1/connections/c1", true, "0 of role everything", ""},
	}
	for _, tt := range tests {
		d := rs.Decide(Request{Method: tt.method, Path: tt.path})
		if d.Allowed != tt.allowed || d.Where() != tt.where {
			t.Errorf("%s %s: allowed %v by %q, want %v by %q", tt.method, tt.path, d.Allowed, d.Where(), tt.allowed, tt.where)
		}
		if !tt.allowed && d.Refusal(tt.method, tt.path) != tt.msg {
			t.Errorf("%s %s: %q, want %q", tt.method, tt.path, d.Refusal(tt.method, tt.path), tt.msg)
		}
	}
	// The order of the roles is the order of their rules: everything first allows the DELETE.
	if d := Join(own, everything, readOnly).Decide(Request{Method: "DELETE", Path: "/v1/connections/c1"}); !d.Allowed || d.Where() != "0 of role everything" {
		t.Errorf("everything before read-only: %+v", d)
	}
	// Joined rules of which none matches refuse, as a key's own do.
	if d := Join(nil, nil).Decide(Request{Method: "GET", Path: "/"}); d.Allowed || d.Refusal("GET", "/") != "no permissions rule allows GET /" {
		t.Errorf("no rules: %+v", d)
	}
}

// TestMissingRole: a missing role refuses everything, saying which.
func TestMissingRole(t *testing.T) {
	d := Missing("read-only", "does not exist").Decide(Request{Method: "GET", Path: "/v1/connections"})
	if d.Allowed || d.Where() != "role read-only" || d.Refusal("GET", "/v1/connections") != "permissions role read-only does not exist" {
		t.Errorf("%+v: %q", d, d.Refusal("GET", "/v1/connections"))
	}
}

// TestCompileRoleErrors: a role's errors name its rules as rules[i], a key's as permissions[i].
func TestCompileRoleErrors(t *testing.T) {
	bad := []switchboardv1alpha1.PermissionRule{allow(nil), deny(nil, "v1")}
	if _, err := CompileRole("r", bad); err == nil || !strings.HasPrefix(err.Error(), "rules[1]: ") {
		t.Errorf("CompileRole: %v", err)
	}
	if _, err := Compile(bad); err == nil || !strings.HasPrefix(err.Error(), "permissions[1]: ") {
		t.Errorf("Compile: %v", err)
	}
	if rs, err := CompileRole("r", nil); rs != nil || err != nil {
		t.Errorf("CompileRole(nil) = %v, %v", rs, err)
	}
}
