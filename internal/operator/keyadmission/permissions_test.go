//go:build !unit

package keyadmission_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestWebhookRefusesPermissionsThatDoNotCompile: through the real API server, an APIKey (one
// that renews nothing) whose permissions the server could not compile is refused, the wrong
// rule named by its index and why: a path template that does not parse, a condition that does
// not compile or could cost too much. Rules that compile are admitted, and so is an update
// that leaves them alone; one that breaks them is refused.
func TestWebhookRefusesPermissionsThatDoNotCompile(t *testing.T) {
	ns := sys.Namespace(t, "permissions")
	waitForWebhook(t, ns)
	readOnly := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow,
		Methods: []switchboardv1alpha1.HTTPMethod{"GET", "HEAD"}, Paths: []string{"/v1/**"}}
	withRule := func(name string, r switchboardv1alpha1.PermissionRule) *switchboardv1alpha1.APIKey {
		return &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: switchboardv1alpha1.APIKeySpec{SecretName: name + "-key", Permissions: []switchboardv1alpha1.PermissionRule{readOnly, r}}}
	}
	costly := `request.params.exists(k, request.params.exists(j, request.path.matches(k + j)))`
	tests := []struct {
		name string
		rule switchboardv1alpha1.PermissionRule
		want string // the refusal; "" for admitted
	}{
		{"a template that does not parse", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, Paths: []string{"/v1/**/x"}},
			`spec.permissions[1]: path "/v1/**/x": segment "**": '{', '}', '*', '?', '#' and '%' are only allowed as {name} or a final /**`},
		{"a capture twice", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, Paths: []string{"/v1/{id}/{id}"}},
			`spec.permissions[1]: path "/v1/{id}/{id}": {id} is captured twice`},
		{"CEL that does not compile", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, Condition: `request.user == "x"`},
			"spec.permissions[1]: condition: undeclared reference to 'request' (in container '') (column 1); a condition reads request.method, request.path, request.params, request.audience, request.source"},
		{"CEL over the cost bound", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, Condition: costly},
			"spec.permissions[1]: condition: could cost"},
		{"rules that compile", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny,
			Paths: []string{"/v1/connections/{id}"}, Condition: `request.params.id.startsWith("conn_")`}, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sys.Client.Create(testContext(t), withRule("key-"+string(rune('a'+i)), tt.rule))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "permissions.apikeys.switchboard.dev") {
				t.Fatalf("got %v, want the webhook's refusal with %q", err, tt.want)
			}
		})
	}
	got := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "key-e"}}
	patch := func(p string) error {
		return sys.Client.Patch(testContext(t), got, client.RawPatch(types.MergePatchType, []byte(p)))
	}
	if err := patch(`{"spec":{"description":"changed"}}`); err != nil {
		t.Fatalf("an update that leaves the permissions alone: %v", err)
	}
	if err := patch(`{"spec":{"permissions":[{"effect":"Allow","paths":["/v1/{"]}]}}`); err == nil || !strings.Contains(err.Error(), `spec.permissions[0]: path "/v1/{"`) {
		t.Fatalf("breaking the permissions: %v, want a refusal", err)
	}
}

// TestWebhookRefusesRoleRulesThatDoNotCompile: an APIKeyRole's rules are checked as an
// APIKey's permissions are, the wrong rule named as spec.rules[i]; rules that compile are
// admitted, and an update that breaks them is refused.
func TestWebhookRefusesRoleRulesThatDoNotCompile(t *testing.T) {
	ns := sys.Namespace(t, "role-rules")
	waitForWebhook(t, ns)
	role := func(name string, rules ...switchboardv1alpha1.PermissionRule) *switchboardv1alpha1.APIKeyRole {
		return &switchboardv1alpha1.APIKeyRole{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: switchboardv1alpha1.APIKeyRoleSpec{Rules: rules}}
	}
	readOnly := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Methods: []switchboardv1alpha1.HTTPMethod{"GET"}, Paths: []string{"/v1/**"}}
	err := sys.Client.Create(testContext(t), role("broken", readOnly, switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, Condition: `request.user == "x"`}))
	if err == nil || !strings.Contains(err.Error(), "spec.rules[1]: condition: undeclared reference") || !strings.Contains(err.Error(), "permissions.apikeyroles.switchboard.dev") {
		t.Fatalf("a condition that does not compile: %v", err)
	}
	good := role("read-only", readOnly)
	if err := sys.Client.Create(testContext(t), good); err != nil {
		t.Fatalf("rules that compile: %v", err)
	}
	if err := sys.Client.Patch(testContext(t), good, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"rules":[{"effect":"Allow","paths":["/v1/{"]}]}}`))); err == nil ||
		!strings.Contains(err.Error(), `spec.rules[0]: path "/v1/{"`) {
		t.Fatalf("breaking the rules: %v, want a refusal", err)
	}
}
