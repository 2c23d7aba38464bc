package plugin

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/switchboard-dev/switchboard/internal/reveal"
)

// ErrForbidden marks errors where RBAC refused the user; the message says which permission.
var ErrForbidden = errors.New("forbidden")

// ErrTimeout marks giving up on waiting for the operator.
var ErrTimeout = errors.New("timed out waiting for the operator")

// ErrAlreadyClaimed is reveal.ErrAlreadyClaimed, re-exported so callers need one import.
var ErrAlreadyClaimed = reveal.ErrAlreadyClaimed

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

// joinVerbs lists permissions as "create apikeys.switchboard.dev, delete secrets".
func joinVerbs(perms []permission) string {
	parts := make([]string, 0, len(perms))
	for _, p := range perms {
		parts = append(parts, p.verb+" "+p.resource())
	}
	return strings.Join(parts, ", ")
}
