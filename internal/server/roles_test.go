//go:build !unit

package server

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

// TestPermissionRoles: through the real API server, a key naming an APIKeyRole follows its own
// rules, then the role's; a refusal by the role's rule names the role, on /v1 and ext_authz
// (whose headers and metadata say "0 of role R"). Editing the role changes the key's answers
// within seconds, the key untouched; deleting it refuses the key everything, saying so.
func TestPermissionRoles(t *testing.T) {
	ns := env.Namespace(t, "roles")
	newConnection(t, ns, "a", "conn_a", nil)
	role := &switchboardv1alpha1.APIKeyRole{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-only"}, Spec: switchboardv1alpha1.APIKeyRoleSpec{
		Rules: []switchboardv1alpha1.PermissionRule{
			{Effect: switchboardv1alpha1.PermissionDeny, Methods: []switchboardv1alpha1.HTTPMethod{"DELETE"}, Paths: []string{"/v1/**"}},
			{Effect: switchboardv1alpha1.PermissionAllow, Methods: []switchboardv1alpha1.HTTPMethod{"GET", "HEAD"}, Paths: []string{"/v1/**"}},
		}}}
	if err := env.Client.Create(ctx(t), role); err != nil {
		t.Fatal(err)
	}
	k := newKey(t, ns, "reader", switchboardv1alpha1.APIKeySpec{PermissionRoles: []string{"read-only"}, Permissions: []switchboardv1alpha1.PermissionRule{
		{Effect: switchboardv1alpha1.PermissionDeny, Methods: []switchboardv1alpha1.HTTPMethod{"POST"}},
	}})
	s := startAuthzServer(t, &sc{}, Deps{}, true)
	v1 := func() permissionAnswer {
		return httpPermissionAnswer(t, s.request(t, http.MethodGet, "/v1/connections", func(h http.Header) { h.Set("Authorization", withBearer(k.Key)) }))
	}
	eventually(t, "the key allowed by its role", func() bool { return v1().status == http.StatusOK })
	extAuthz := func(method string) permissionAnswer {
		in := checkRequestOf(call{authorization: withBearer(k.Key), client: "192.0.2.1", audience: "connections"})
		in.Attributes.Request.Http.Method, in.Attributes.Request.Http.Path = method, "/v1/connections/conn_a"
		resp, err := s.grpc.Check(ctx(t), in)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return grpcPermissionAnswer(t, resp)
	}
	denied := func(message, index, text string) permissionAnswer {
		return permissionAnswer{status: http.StatusForbidden, code: apicode.PermissionDenied, message: message, ruleIndex: index, ruleText: text}
	}
	for _, row := range []struct {
		name      string
		got, want permissionAnswer
	}{
		{"the role's allow", extAuthz("GET"), permissionAnswer{status: http.StatusOK}},
		{"the role's deny", extAuthz("DELETE"), denied("refused by rule 0 of role read-only (deny DELETE /v1/**)", "0 of role read-only", "deny DELETE /v1/**")},
		{"the key's own rule first", extAuthz("POST"), denied("refused by permissions rule 0 (deny POST *)", "0", "deny POST *")},
		{"no rule", extAuthz("PUT"), denied("no permissions rule allows PUT /v1/connections/conn_a", "", "")},
	} {
		if row.got != row.want {
			t.Errorf("%s: got %+v, want %+v", row.name, row.got, row.want)
		}
	}

	// The role edited: the key's answer follows, the key untouched.
	role.Spec.Rules[1].Paths = []string{"/v1/connections/{id}"}
	if err := env.Client.Update(ctx(t), role); err != nil {
		t.Fatal(err)
	}
	want := denied("no permissions rule allows GET /v1/connections", "", "")
	eventually(t, "the role's edit followed", func() bool { return v1() == want })

	// The role deleted: the key may do nothing, and is told why.
	if err := env.Client.Delete(ctx(t), role); err != nil {
		t.Fatal(err)
	}
	want = denied("permissions role read-only does not exist", "", "")
	eventually(t, "the role's deletion followed", func() bool { return v1() == want })
	if got, w := extAuthz("GET"), denied("permissions role read-only does not exist", "role read-only", "permissions role read-only does not exist"); got != w {
		t.Errorf("ext_authz without the role: %+v, want %+v", got, w)
	}
}
