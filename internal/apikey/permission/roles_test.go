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

// compiled finds roles among those given, by name.
func compiled(roles ...*Rules) func(string) (*Rules, bool) {
	return func(name string) (*Rules, bool) {
		for _, r := range roles {
			if r != nil && r.rules[0].role == name {
				return r, true
			}
		}
		return nil, name == "empty"
	}
}

// TestWithRoles: a key's own rules come first, then each role's in the order named; the
// first that matches decides, and its refusal and Where name its source and its index there.
func TestWithRoles(t *testing.T) {
	own := mustCompile(t, deny(methods("POST"), "/v1/**"))
	readOnly := mustCompileRole(t, "read-only", allow(methods("GET", "HEAD"), "/v1/connections/**"), deny(methods("DELETE"), "/v1/**"))
	everything := mustCompileRole(t, "everything", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow})
	rs := WithRoles(own, []string{"empty", "read-only", "everything"}, compiled(readOnly, everything))
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
	if d := WithRoles(own, []string{"everything", "read-only"}, compiled(readOnly, everything)).Decide(Request{Method: "DELETE", Path: "/v1/connections/c1"}); !d.Allowed || d.Where() != "0 of role everything" {
		t.Errorf("everything before read-only: %+v", d)
	}
	// Joined rules of which none matches refuse, as a key's own do.
	if d := WithRoles(nil, []string{"empty"}, compiled()).Decide(Request{Method: "GET", Path: "/"}); d.Allowed || d.Refusal("GET", "/") != "no permissions rule allows GET /" {
		t.Errorf("no rules: %+v", d)
	}
}

// TestMissingRole: a missing role, or one whose rules do not compile, refuses everything,
// whatever the key's own rules and the other roles allow, saying which.
func TestMissingRole(t *testing.T) {
	own := mustCompile(t, allow(nil))
	broken, _ := CompileRole("broken", []switchboardv1alpha1.PermissionRule{allow(nil, "v1")})
	for _, tt := range []struct {
		roles       []string
		where, want string
	}{
		{[]string{"empty", "read-only"}, "role read-only", "permissions role read-only does not exist"},
		{[]string{"broken"}, "role broken", "permissions role broken has rules that do not compile"},
	} {
		d := WithRoles(own, tt.roles, compiled(broken)).Decide(Request{Method: "GET", Path: "/v1/connections"})
		if d.Allowed || d.Where() != tt.where || d.Refusal("GET", "/v1/connections") != tt.want {
			t.Errorf("%v: %+v: %q", tt.roles, d, d.Refusal("GET", "/v1/connections"))
		}
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

// TestConditionsARequestEvaluates: however many conditions a key's roles add, one request
// evaluates at most MaxPermissionConditions; past them a condition cannot be told, and fails
// closed (an Allow rule does not match, a Deny rule does).
func TestConditionsARequestEvaluates(t *testing.T) {
	cond := func(effect switchboardv1alpha1.PermissionEffect, c string) switchboardv1alpha1.PermissionRule {
		return switchboardv1alpha1.PermissionRule{Effect: effect, Condition: c}
	}
	var own []switchboardv1alpha1.PermissionRule
	for range switchboardv1alpha1.MaxPermissionConditions {
		own = append(own, cond(switchboardv1alpha1.PermissionAllow, "false"))
	}
	key := mustCompile(t, own...)
	allowAll := mustCompileRole(t, "allow-all", cond(switchboardv1alpha1.PermissionAllow, "true"))
	denyNone := mustCompileRole(t, "deny-none", cond(switchboardv1alpha1.PermissionDeny, "false"))
	req := Request{Method: "GET", Path: "/v1/connections"}

	if d := WithRoles(key, []string{"allow-all"}, compiled(allowAll)).Decide(req); d.Allowed || d.Rule != -1 {
		t.Errorf("a ninth condition that would allow: %+v, want no rule to allow", d)
	}
	if d := WithRoles(key, []string{"deny-none"}, compiled(denyNone)).Decide(req); d.Allowed || d.Rule != 0 || d.Role != "deny-none" {
		t.Errorf("a ninth condition that would not deny: %+v, want rule 0 of role deny-none to refuse", d)
	}
	// Within the bound, the same role decides by its condition.
	if d := WithRoles(mustCompile(t, own[1:]...), []string{"allow-all"}, compiled(allowAll)).Decide(req); !d.Allowed {
		t.Errorf("an eighth condition: %+v, want allowed", d)
	}
}
