package plugin

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// Errors the plugin's failures wrap, re-exported from keyclient so callers need one import:
// RBAC refused the user (the message says which permission), the operator did not answer in
// time, somebody else claimed the key first.
var (
	ErrForbidden      = keyclient.ErrForbidden
	ErrTimeout        = keyclient.ErrTimeout
	ErrAlreadyClaimed = keyclient.ErrAlreadyClaimed
)

// forbiddenMessage matches the API server's RBAC refusal, for example:
// User "system:serviceaccount:a:b" cannot create resource "apikeys" in API group "switchboard.dev" in the namespace "a".
var forbiddenMessage = regexp.MustCompile(`User "([^"]*)" cannot (\S+) resource "([^"]+)"(?: in API group "([^"]*)")?`)

// action is an API call the plugin makes, for error messages.
type action struct {
	verb      string // get, create, patch, delete, list
	resource  string // "apikeys.switchboard.dev", "secrets", …
	kind      string // what a person calls it: APIKey, Secret, Service
	namespace string
	name      string
}

// explain turns an API error into one clear line: not found, forbidden (with the missing
// permission), refused by validation, or the error as it is.
func explain(err error, a action) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err) && a.name != "":
		return fmt.Errorf("%s %q not found in namespace %q", a.kind, a.name, a.namespace)
	case apierrors.IsForbidden(err) && errors.As(err, &status):
		return forbidden(status.Status().Message, a)
	case apierrors.IsInvalid(err) && errors.As(err, &status):
		return fmt.Errorf("the API server refused the %s: %s", a.kind, status.Status().Message)
	case apierrors.IsUnauthorized(err):
		return errors.New("the Kubernetes API server did not accept your credentials (Unauthorized): check your kubeconfig, or log in again")
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		host := urlErr.URL
		if u, perr := url.Parse(urlErr.URL); perr == nil {
			host = u.Scheme + "://" + u.Host
		}
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %w", host, urlErr.Err)
	}
	return err
}

// forbidden names the permission RBAC refused. It prefers what the API server said (which
// verb on which resource, for which user) and falls back to the action attempted.
func forbidden(message string, a action) error {
	user, verb, resource := "", a.verb, a.resource
	if m := forbiddenMessage.FindStringSubmatch(message); m != nil {
		user, verb, resource = m[1], m[2], m[3]
		if m[4] != "" {
			resource += "." + m[4]
		}
	}
	who := "you"
	if user != "" {
		who = fmt.Sprintf("you (%s)", user)
	}
	where := ""
	if a.namespace != "" {
		where = fmt.Sprintf(" in namespace %q", a.namespace)
	}
	return fmt.Errorf("%w: %s may not %s %s%s; ask a cluster administrator for a Role that grants %q on %q",
		ErrForbidden, who, verb, resource, where, verb, resource)
}

// explainKey words an error of the key workflow as one line: a permission check that failed,
// a call the API server refused (see explain), or the workflow's own errors as they are.
func explainKey(err error) error {
	var (
		forbiddenErr *keyclient.ForbiddenError
		apiErr       *keyclient.APIError
		abandoned    *keyclient.AbandonedError
		claimed      *keyclient.ClaimedError
	)
	switch {
	case errors.As(err, &abandoned):
		cause := explainKey(abandoned.Cause)
		if errors.As(abandoned.Cause, &claimed) {
			cause = fmt.Errorf("the key of APIKey %q%s was already claimed by someone else before you", claimed.Name, hintSuffix(claimed.Hint))
		}
		if abandoned.DeleteErr != nil {
			return fmt.Errorf("%w; the APIKey %q was left in place because deleting it failed: %s", cause, abandoned.Name, oneLine(explainKey(abandoned.DeleteErr).Error()))
		}
		return fmt.Errorf("%w; the APIKey %q was deleted again, so no key is left that someone else holds or nobody saw; nothing was kept", cause, abandoned.Name)
	case errors.As(err, &forbiddenErr):
		who := "you"
		if forbiddenErr.User != "" {
			who = fmt.Sprintf("you (%s)", forbiddenErr.User)
		}
		missing := keyclient.JoinPermissions(forbiddenErr.Missing)
		return fmt.Errorf("%w: %s may not %s in namespace %q (needed to %s); ask a cluster administrator for a Role that grants %s; nothing was changed",
			ErrForbidden, who, missing, forbiddenErr.Namespace, forbiddenErr.Missing[0].Purpose, missing)
	case errors.As(err, &apiErr):
		p := apiErr.Permission
		return explain(apiErr.Err, action{verb: p.Verb, resource: p.Resource.String(), kind: p.Resource.Kind, namespace: apiErr.Namespace, name: apiErr.Name})
	}
	return err
}

// hintSuffix is " (hint)" for messages, or nothing when the hint is unknown.
func hintSuffix(hint string) string {
	if hint == "" {
		return ""
	}
	return " (" + hint + ")"
}
