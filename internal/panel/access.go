package panel

import (
	"context"
	"fmt"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Permissions a key owner needs, so that the panel checks them all before it changes anything:
// an APIKey created by someone who may not claim its reveal Secret would be a key nobody saw.
var (
	createNeeds = []action{
		{Verb: "create", Resource: "apikeys", Group: "switchboard.dev"},
		{Verb: "get", Resource: "secrets"},
		{Verb: "delete", Resource: "secrets"},
	}
	rotateNeeds = []action{
		{Verb: "patch", Resource: "apikeys", Group: "switchboard.dev"},
		{Verb: "get", Resource: "secrets"},
		{Verb: "delete", Resource: "secrets"},
	}
)

// checkAccess asks the API server, with the person's token, whether they may do each of needs
// in ns (SelfSubjectAccessReview, which every authenticated user may create). It returns the
// problem naming the first missing permission, or nil.
func checkAccess(ctx context.Context, c client.Client, ns string, needs []action) *problem {
	for _, need := range needs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: need.Verb, Group: need.Group, Resource: need.Resource,
			},
		}}
		if err := c.Create(ctx, review); err != nil {
			p := describe(err, action{Verb: "create", Resource: "selfsubjectaccessreviews", Group: authorizationv1.GroupName, Namespace: ns})
			return &p
		}
		if !review.Status.Allowed {
			return &problem{Status: http.StatusForbidden, Message: fmt.Sprintf(
				"Forbidden: you may not %s %s in namespace %q, which this needs; nothing was changed. Ask an administrator for a Role granting %q on %s.",
				need.Verb, qualified(need.Resource, need.Group), ns, need.Verb, qualified(need.Resource, need.Group))}
		}
	}
	return nil
}
