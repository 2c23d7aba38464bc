package keyclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Resource is a Kubernetes resource as RBAC names it.
type Resource struct {
	// Group is the API group, "" for the core group.
	Group string
	// Plural is the resource: "apikeys", "secrets".
	Plural string
	// Kind is what a person calls one: "APIKey", "Secret".
	Kind string
}

// The resources the key workflow touches.
var (
	APIKeys = Resource{Group: switchboardv1alpha1.GroupVersion.Group, Plural: "apikeys", Kind: "APIKey"}
	Secrets = Resource{Plural: "secrets", Kind: "Secret"}
)

// String is the resource as RBAC messages name it: "secrets", "apikeys.switchboard.dev".
func (r Resource) String() string {
	if r.Group == "" {
		return r.Plural
	}
	return r.Plural + "." + r.Group
}

func (r Resource) verb(v string) Permission { return Permission{Verb: v, Resource: r} }

// Permission is one RBAC right an operation needs.
type Permission struct {
	Verb     string
	Resource Resource
	// Purpose says what the operation needs it for ("claim the key's one-time reveal Secret").
	Purpose string
}

// String is "create apikeys.switchboard.dev".
func (p Permission) String() string { return p.Verb + " " + p.Resource.String() }

func (p Permission) forPurpose(purpose string) Permission {
	p.Purpose = purpose
	return p
}

// Operation is one of the key operations, for Needs.
type Operation string

// The operations.
const (
	OpCreate Operation = "create"
	OpRotate Operation = "rotate"
	OpReveal Operation = "reveal"
	OpRevoke Operation = "revoke"
	// OpSetPolicy changes a key's rate limit, allowed source ranges and audiences (SetPolicy).
	OpSetPolicy Operation = "set-policy"
)

// Needs lists the permissions op needs in the APIKey's namespace. delivered says the key goes
// into a delivery Secret (spec.secretName) instead of a one-time reveal, which then needs no
// Secret permission. Create needs "get apikeys" and "delete apikeys" too: without them the
// creator could neither see the key issued nor delete the APIKey again when its key cannot be
// handed over, and it would stay a key nobody saw.
func Needs(op Operation, delivered bool) []Permission {
	var perms []Permission
	switch op {
	case OpCreate:
		perms = []Permission{
			APIKeys.verb("create").forPurpose("create the APIKey"),
			APIKeys.verb("get").forPurpose("wait for its key"),
			APIKeys.verb("delete").forPurpose("delete the APIKey again should its key not be handed over"),
		}
	case OpRotate:
		perms = []Permission{APIKeys.verb("get").forPurpose("read the APIKey"), APIKeys.verb("patch").forPurpose("request the rotation")}
	case OpReveal:
		perms = []Permission{APIKeys.verb("get").forPurpose("read the APIKey")}
	case OpRevoke:
		return []Permission{APIKeys.verb("get").forPurpose("read the APIKey"), APIKeys.verb("patch").forPurpose("revoke the key")}
	case OpSetPolicy:
		return []Permission{APIKeys.verb("get").forPurpose("read the APIKey"), APIKeys.verb("patch").forPurpose("change its policy")}
	}
	if !delivered {
		perms = append(perms, ClaimPermissions()...)
	}
	return perms
}

// ClaimPermissions are what claiming a one-time reveal needs on its Secret: get, then delete.
func ClaimPermissions() []Permission {
	return []Permission{
		Secrets.verb("get").forPurpose("read the key's one-time reveal Secret"),
		Secrets.verb("delete").forPurpose("claim the key's one-time reveal Secret"),
	}
}

// ErrForbidden marks errors where RBAC refused the caller.
var ErrForbidden = errors.New("forbidden")

// ForbiddenError is a permission check that found rights missing: nothing was changed.
type ForbiddenError struct {
	// User is the caller as the API server knows them ("" when it would not say).
	User      string
	Namespace string
	// Missing are the permissions the caller lacks, in the order the operation needs them.
	Missing []Permission
}

func (e *ForbiddenError) Error() string {
	who := "you"
	if e.User != "" {
		who = fmt.Sprintf("you (%s)", e.User)
	}
	return fmt.Sprintf("forbidden: %s may not %s in namespace %q (needed to %s); nothing was changed",
		who, JoinPermissions(e.Missing), e.Namespace, e.Missing[0].Purpose)
}

// Is makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// JoinPermissions lists permissions as "create apikeys.switchboard.dev, delete secrets".
func JoinPermissions(perms []Permission) string {
	parts := make([]string, 0, len(perms))
	for _, p := range perms {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ", ")
}

// Check asks the API server whether the caller holds perms in namespace
// (SelfSubjectAccessReview, which every authenticated user may create), so that an operation
// that would fail half-way (an APIKey created whose key its creator may not read) fails before
// it changes anything. It returns a *ForbiddenError naming every missing permission, or an
// *APIError when a review cannot be made (a token the API server refuses, say).
func (k *Client) Check(ctx context.Context, namespace string, perms []Permission) error {
	var missing []Permission
	for _, p := range perms {
		review := &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: namespace, Verb: p.Verb, Group: p.Resource.Group, Resource: p.Resource.Plural,
				},
			},
		}
		if err := k.c.Create(ctx, review); err != nil {
			return apiError(err, accessReviews.verb("create"), namespace, "")
		}
		if !review.Status.Allowed {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &ForbiddenError{User: k.whoAmI(ctx), Namespace: namespace, Missing: missing}
}

var accessReviews = Resource{Group: authorizationv1.GroupName, Plural: "selfsubjectaccessreviews", Kind: "SelfSubjectAccessReview"}

// whoAmI names the caller as the API server knows them (SelfSubjectReview, which every
// authenticated user may create), or "" when it will not say.
func (k *Client) whoAmI(ctx context.Context) string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := k.c.Create(ctx, review); err != nil {
		return ""
	}
	return review.Status.UserInfo.Username
}

// APIError is a call to the API server that failed: which call, and the API server's error
// (test it with apierrors.IsNotFound and friends, which see through the wrapping).
type APIError struct {
	Permission Permission
	Namespace  string
	// Name is the object's name, "" for a create or a list.
	Name string
	Err  error
}

func (e *APIError) Error() string {
	what := e.Permission.Resource.Kind
	if e.Name != "" {
		what += fmt.Sprintf(" %q", e.Name)
	}
	return fmt.Sprintf("%s %s in namespace %q: %v", e.Permission.Verb, what, e.Namespace, e.Err)
}

func (e *APIError) Unwrap() error { return e.Err }

func apiError(err error, p Permission, namespace, name string) error {
	if err == nil {
		return nil
	}
	return &APIError{Permission: p, Namespace: namespace, Name: name, Err: err}
}
