//go:build !unit

package server

import (
	"encoding/json"
	"net/http"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/authz"
)

// permissionAnswer is what a protocol answered a key's permissions: the status, the error's code
// and message, and the rule a gateway is told beside them.
type permissionAnswer struct {
	status              int
	code, message       string
	ruleIndex, ruleText string
}

func errorOf(t *testing.T, body []byte) (code, message string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error.Code, e.Error.Message
}

func httpPermissionAnswer(t *testing.T, resp response) permissionAnswer {
	t.Helper()
	a := permissionAnswer{status: resp.Status, ruleIndex: resp.Header.Get(authz.HeaderPermissionRule), ruleText: resp.Header.Get(authz.HeaderPermissionRuleText)}
	if resp.Status != http.StatusOK {
		a.code, a.message = errorOf(t, resp.Body)
	}
	return a
}

// TestPermissionsEverywhere: through the real API server, a key's permissions allow and refuse
// requests as its rules say on /v1, forward-auth (the original request told as Traefik and
// Caddy tell it, and as NGINX's configuration does) and ext_authz, each refusal 403
// API_KEY_PERMISSION_DENIED naming the rule that refused it, or saying that none allowed it;
// a gateway is told the rule beside it, ext_authz in its dynamic metadata too. A key without
// permissions is unchanged, and one whose permissions are removed may do anything again.
func TestPermissionsEverywhere(t *testing.T) {
	ns := env.Namespace(t, "permissions")
	newConnection(t, ns, "a", "conn_a", nil)
	get := []switchboardv1alpha1.HTTPMethod{"GET", "HEAD"}
	readOnly := newKey(t, ns, "read-only", switchboardv1alpha1.APIKeySpec{Permissions: []switchboardv1alpha1.PermissionRule{
		{Effect: switchboardv1alpha1.PermissionAllow, Methods: get, Paths: []string{"/v1/**"}},
	}})
	noList := newKey(t, ns, "no-list", switchboardv1alpha1.APIKeySpec{Permissions: []switchboardv1alpha1.PermissionRule{
		{Effect: switchboardv1alpha1.PermissionAllow, Methods: []switchboardv1alpha1.HTTPMethod{"POST"}},
		{Effect: switchboardv1alpha1.PermissionDeny, Methods: get, Paths: []string{"/v1/connections"}},
		{Effect: switchboardv1alpha1.PermissionAllow, Paths: []string{"/v1/connections/{id}"}, Condition: `request.params.id.startsWith("conn_")`},
	}})
	plain := newKey(t, ns, "plain", switchboardv1alpha1.APIKeySpec{})
	s := startAuthzServer(t, &sc{TrustedProxies: []string{"127.0.0.1/32"}}, Deps{}, true)
	for _, k := range []*keyFixture{readOnly, noList, plain} {
		firstAnswer(t, s.testServer, k.Key, nil)
	}

	v1 := func(k *keyFixture) permissionAnswer {
		return httpPermissionAnswer(t, s.request(t, http.MethodGet, "/v1/connections", func(h http.Header) { h.Set("Authorization", withBearer(k.Key)) }))
	}
	forwardAuth := func(path string, k *keyFixture, header map[string]string) permissionAnswer {
		req, err := http.NewRequest(http.MethodGet, s.httpURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", withBearer(k.Key))
		for name, v := range header {
			req.Header.Set(name, v)
		}
		return httpPermissionAnswer(t, s.do(t, req))
	}
	traefik := func(method, uri string) map[string]string {
		return map[string]string{"X-Forwarded-Method": method, "X-Forwarded-Uri": uri}
	}
	nginx := func(method, uri string) map[string]string {
		return map[string]string{"X-Original-Method": method, "X-Original-URI": uri}
	}
	extAuthz := func(k *keyFixture, method, path string) permissionAnswer {
		in := checkRequestOf(call{authorization: withBearer(k.Key), client: "192.0.2.1", audience: "connections"})
		in.Attributes.Request.Http.Method, in.Attributes.Request.Http.Path = method, path
		resp, err := s.grpc.Check(ctx(t), in)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return grpcPermissionAnswer(t, resp)
	}
	denied := func(message, index, text string) permissionAnswer {
		return permissionAnswer{status: http.StatusForbidden, code: apicode.PermissionDenied, message: message, ruleIndex: index, ruleText: text}
	}
	allowed := permissionAnswer{status: http.StatusOK}
	byRule1 := denied("refused by permissions rule 1 (deny GET,HEAD /v1/connections)", "1", "deny GET,HEAD /v1/connections")
	rows := []struct {
		name      string
		got, want permissionAnswer
	}{
		{"/v1: read-only GET", v1(readOnly), allowed},
		{"/v1: a deny rule, named in the message alone", v1(noList), denied(byRule1.message, "", "")},
		{"/v1: no permissions", v1(plain), allowed},
		{"forward-auth: read-only GET", forwardAuth("/authz/connections", readOnly, traefik("GET", "/v1/connections/conn_a?x=1")), allowed},
		{"forward-auth: read-only DELETE", forwardAuth("/authz/connections", readOnly, traefik("DELETE", "/v1/connections/conn_a?x=1")),
			denied("no permissions rule allows DELETE /v1/connections/conn_a", "", "")},
		{"forward-auth: the original request untold fails closed", forwardAuth("/authz/connections", readOnly, nil),
			denied("no permissions rule allows (an unknown method) (an unknown path)", "", "")},
		{"forward-auth: a deny rule", forwardAuth("/authz/connections", noList, traefik("HEAD", "/v1/connections")), byRule1},
		{"forward-auth nginx: a deny rule", forwardAuth("/authz/nginx/connections", noList, nginx("GET", "/v1/connections")), byRule1},
		{"forward-auth nginx: a condition that holds", forwardAuth("/authz/nginx/connections", noList, nginx("DELETE", "/v1/connections/conn_a")), allowed},
		{"forward-auth nginx: a client's own X-Forwarded-Uri is not believed", forwardAuth("/authz/nginx/connections", noList,
			map[string]string{"X-Original-Method": "GET", "X-Original-URI": "/v1/connections", "X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/v1/other"}), byRule1},
		{"forward-auth: NGINX's fields are not read outside its mode", forwardAuth("/authz/connections", readOnly, nginx("GET", "/v1/connections")),
			denied("no permissions rule allows (an unknown method) (an unknown path)", "", "")},
		{"forward-auth nginx: a condition that does not", forwardAuth("/authz/nginx/connections", noList, nginx("DELETE", "/v1/connections/other")),
			denied("no permissions rule allows DELETE /v1/connections/other", "", "")},
		{"forward-auth: no permissions", forwardAuth("/authz/connections", plain, traefik("DELETE", "/v1/connections/a")), allowed},
		{"ext_authz: read-only GET", extAuthz(readOnly, "GET", "/v1/connections"), allowed},
		{"ext_authz: read-only POST", extAuthz(readOnly, "POST", "/v1/connections?x=1"), denied("no permissions rule allows POST /v1/connections", "", "")},
		{"ext_authz: the first rule", extAuthz(noList, "POST", "/v1/connections"), allowed},
		{"ext_authz: a deny rule", extAuthz(noList, "GET", "/v1/connections?x=1"), byRule1},
		{"ext_authz: no permissions", extAuthz(plain, "DELETE", "/v1/anything"), allowed},
	}
	for _, row := range rows {
		if row.got != row.want {
			t.Errorf("%s: got %+v, want %+v", row.name, row.got, row.want)
		}
	}

	// Without its permissions, the key may do anything again.
	patchSpec(t, noList.APIKey, func(spec *switchboardv1alpha1.APIKeySpec) { spec.Permissions = nil })
	eventually(t, "the key's permissions gone", func() bool { return v1(noList).status == http.StatusOK })
}

// grpcPermissionAnswer reads a CheckResponse's permissions: the denial's body, and the rule in
// its headers, which its dynamic metadata must repeat.
func grpcPermissionAnswer(t *testing.T, resp *authv3.CheckResponse) permissionAnswer {
	t.Helper()
	if codes.Code(resp.GetStatus().GetCode()) == codes.OK {
		return permissionAnswer{status: http.StatusOK}
	}
	d := resp.GetDeniedResponse()
	a := permissionAnswer{status: int(d.GetStatus().GetCode())}
	a.code, a.message = errorOf(t, []byte(d.GetBody()))
	for _, h := range d.GetHeaders() {
		switch h.GetHeader().GetKey() {
		case authz.HeaderPermissionRule:
			a.ruleIndex = h.GetHeader().GetValue()
		case authz.HeaderPermissionRuleText:
			a.ruleText = h.GetHeader().GetValue()
		}
	}
	md := resp.GetDynamicMetadata().GetFields()[authz.MetadataNamespace].GetStructValue().GetFields()
	if md["permissionRule"].GetStringValue() != a.ruleIndex || md["permissionRuleText"].GetStringValue() != a.ruleText {
		t.Errorf("dynamic metadata %v, headers rule %q %q", md, a.ruleIndex, a.ruleText)
	}
	return a
}
