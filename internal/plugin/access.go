package plugin

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// permission is one RBAC right a command needs.
type permission struct {
	verb    string
	group   string
	plural  string
	purpose string
}

// resource is the resource as RBAC messages name it: "secrets", "apikeys.switchboard.dev".
func (p permission) resource() string {
	if p.group == "" {
		return p.plural
	}
	return p.plural + "." + p.group
}

func apiKeyPermission(verb, purpose string) permission {
	return newPermission(verb, switchboardv1alpha1.GroupVersion.Group, "apikeys", purpose)
}

func secretPermission(verb, purpose string) permission {
	return newPermission(verb, "", "secrets", purpose)
}

func newPermission(verb, group, plural, purpose string) permission {
	return permission{verb: verb, group: group, plural: plural, purpose: purpose}
}

// checkAccess asks the API server (SelfSubjectAccessReview, which every authenticated user
// may create) whether the user holds perms in namespace, so that a command that would fail
// half-way (an APIKey created whose key the user may not read) fails before changing anything.
// When the review itself cannot be made, it returns nil: the real calls will be refused with
// an error that says why.
func checkAccess(ctx context.Context, c client.Client, namespace string, perms ...permission) error {
	var missing []permission
	for _, p := range perms {
		review := &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: namespace, Verb: p.verb, Group: p.group, Resource: p.plural,
				},
			},
		}
		if err := c.Create(ctx, review); err != nil {
			return nil //nolint:nilerr // best effort: the real call reports its own refusal
		}
		if !review.Status.Allowed {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s may not %s in namespace %q (needed to %s); ask a cluster administrator for a Role that grants %s; nothing was changed",
		ErrForbidden, whoAmI(ctx, c), joinVerbs(missing), namespace, missing[0].purpose, joinVerbs(missing))
}

// whoAmI names the user for error messages ("you (jane@example.com)"), as far as the API
// server tells (SelfSubjectReview, which every authenticated user may create).
func whoAmI(ctx context.Context, c client.Client) string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil || review.Status.UserInfo.Username == "" {
		return "you"
	}
	return fmt.Sprintf("you (%s)", review.Status.UserInfo.Username)
}
