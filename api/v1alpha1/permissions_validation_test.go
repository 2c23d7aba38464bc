//go:build !unit

package v1alpha1_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// docsExample is the YAML block of docs/keys.md that names the APIKey name.
func docsExample(t *testing.T, name string) []byte {
	t.Helper()
	doc, err := os.ReadFile("../../docs/keys.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		if block, _, _ = strings.Cut(block, "```"); strings.Contains(block, "metadata: {name: "+name+",") {
			return []byte(block)
		}
	}
	t.Fatalf("docs/keys.md has no example APIKey %s", name)
	return nil
}

// TestPermissionsRoundTrip: docs/keys.md's example is admitted and stored as written.
func TestPermissionsRoundTrip(t *testing.T) {
	ns := env.Namespace(t, "permissions")
	key := &switchboardv1alpha1.APIKey{}
	if err := yaml.UnmarshalStrict(docsExample(t, "reporting"), key); err != nil {
		t.Fatal(err)
	}
	key.Namespace = ns
	if err := env.Client.Create(ctx(t), key); err != nil {
		t.Fatalf("creating the example: %v", err)
	}
	var got switchboardv1alpha1.APIKey
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(key), &got); err != nil {
		t.Fatal(err)
	}
	if p := got.Spec.Permissions; len(p) != 3 || p[1].Methods[1] != "HEAD" || p[2].Condition != `request.params.id.startsWith("conn_test_")` {
		t.Fatalf("the permissions did not round-trip: %+v", p)
	}
}

// TestInvalidPermissionsAreRejected: what the schema bounds is refused by the API server, the
// field named.
func TestInvalidPermissionsAreRejected(t *testing.T) {
	ns := env.Namespace(t, "badpermissions")
	allow := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow}
	tooMany := make([]switchboardv1alpha1.PermissionRule, 33)
	for i := range tooMany {
		tooMany[i] = allow
	}
	rule := func(change func(r *switchboardv1alpha1.PermissionRule)) []switchboardv1alpha1.PermissionRule {
		r := allow
		change(&r)
		return []switchboardv1alpha1.PermissionRule{r}
	}
	tests := []struct {
		name   string
		rules  []switchboardv1alpha1.PermissionRule
		errors []string
	}{
		{"too many rules", tooMany, []string{"spec.permissions", "must have at most 32 items"}},
		{"no effect", rule(func(r *switchboardv1alpha1.PermissionRule) { r.Effect = "" }), []string{"spec.permissions[0].effect", "Unsupported value"}},
		{"an unknown effect", rule(func(r *switchboardv1alpha1.PermissionRule) { r.Effect = "Maybe" }), []string{"spec.permissions[0].effect", "Unsupported value"}},
		{"an unknown method", rule(func(r *switchboardv1alpha1.PermissionRule) { r.Methods = []switchboardv1alpha1.HTTPMethod{"TRACE"} }),
			[]string{"spec.permissions[0].methods[0]", "Unsupported value"}},
		{"a method twice", rule(func(r *switchboardv1alpha1.PermissionRule) {
			r.Methods = []switchboardv1alpha1.HTTPMethod{"GET", "GET"}
		}),
			[]string{"spec.permissions[0].methods[1]", "Duplicate value"}},
		{"a path without /", rule(func(r *switchboardv1alpha1.PermissionRule) { r.Paths = []string{"v1/**"} }), []string{"spec.permissions[0].paths[0]", "should match '^/'"}},
		{"a path too long", rule(func(r *switchboardv1alpha1.PermissionRule) { r.Paths = []string{"/" + strings.Repeat("a", 256)} }),
			[]string{"spec.permissions[0].paths[0]", "may not be more than 256"}},
		{"too many paths", rule(func(r *switchboardv1alpha1.PermissionRule) {
			for i := range 5 {
				r.Paths = append(r.Paths, fmt.Sprintf("/p%d", i))
			}
		}), []string{"spec.permissions[0].paths", "must have at most 4 items"}},
		{"an audience that is not one", rule(func(r *switchboardv1alpha1.PermissionRule) { r.Audiences = []switchboardv1alpha1.Audience{"Billing"} }),
			[]string{"spec.permissions[0].audiences[0]", "an audience is a DNS label"}},
		{"a source range that is not one", rule(func(r *switchboardv1alpha1.PermissionRule) {
			r.SourceRanges = []switchboardv1alpha1.CIDR{"203.0.113.7/24"}
		}),
			[]string{"spec.permissions[0].sourceRanges[0]", "203.0.113.0/24"}},
		{"a condition too long", rule(func(r *switchboardv1alpha1.PermissionRule) { r.Condition = strings.Repeat("true && ", 64) + "true" }),
			[]string{"spec.permissions[0].condition", "may not be more than 512"}},
		{"too many conditions", func() []switchboardv1alpha1.PermissionRule {
			rules := make([]switchboardv1alpha1.PermissionRule, 9)
			for i := range rules {
				rules[i] = allow
				rules[i].Condition = "true"
			}
			return rules
		}(), []string{"spec.permissions", "at most 8 permissions rules may have a condition"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)},
				Spec: switchboardv1alpha1.APIKeySpec{Permissions: tt.rules}}
			err := env.Client.Create(ctx(t), key)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, want := range tt.errors {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
