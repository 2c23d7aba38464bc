package panel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/switchboard-dev/switchboard/internal/reveal"
)

// action is what the panel tried, in RBAC terms, so that a refusal can name the permission.
type action struct {
	Verb      string // get, list, create, patch, delete
	Resource  string // apikeys, secrets, connections, namespaces
	Group     string // "" for the core group
	Namespace string
	Name      string
}

// timeoutError is the operator not issuing a key in time.
type timeoutError struct {
	name  string
	what  string // "created" or "rotated"
	after time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("Timed out after %s waiting for the operator to issue the key of APIKey “%s”: the switchboard operator may not be running. "+
		"The APIKey was %s; its key can be shown from the table once the operator has issued it.", e.after, e.name, e.what)
}

// problem is an error as the page shows it: one line, and the HTTP status of the page.
type problem struct {
	Status  int
	Message string
	// SignedOut means the API server refused the token itself: the session is over.
	SignedOut bool
}

// forbiddenDetail pulls verb, resource and group out of the API server's refusal, which names
// them exactly ("... cannot get resource "secrets" in API group "" in the namespace ...").
var forbiddenDetail = regexp.MustCompile(`cannot (\S+) resource "([^"]+)"(?: in API group "([^"]*)")?`)

// describe turns an error of act into one clear line. It never includes request bodies, so
// no key can leak through it; the API server's messages never contain the bearer token.
func describe(err error, act action) problem {
	switch {
	case errors.As(err, new(*timeoutError)):
		return problem{http.StatusGatewayTimeout, err.Error(), false}
	case errors.As(err, new(*issueError)):
		return problem{http.StatusConflict, err.Error(), false}
	case errors.Is(err, reveal.ErrAlreadyClaimed):
		return problem{http.StatusConflict, "The key of " + act.Name + " was already shown (claimed by someone else, or its reveal expired). Rotate the key to get a new one.", false}
	case errors.Is(err, reveal.ErrNotPublished):
		return problem{http.StatusConflict, "APIKey " + act.Name + " has no key waiting to be shown. Rotate it to get a new one.", false}
	case apierrors.IsUnauthorized(err):
		return problem{http.StatusUnauthorized, "The API server no longer accepts your token. Sign in again.", true}
	case apierrors.IsForbidden(err):
		verb, resource, group := act.Verb, act.Resource, act.Group
		if m := forbiddenDetail.FindStringSubmatch(err.Error()); m != nil {
			verb, resource, group = m[1], m[2], m[3]
		}
		return problem{http.StatusForbidden, fmt.Sprintf(
			"Forbidden: you may not %s %s in namespace %q. Ask an administrator for a Role granting %q on %s.",
			verb, qualified(resource, group), act.Namespace, verb, qualified(resource, group)), false}
	case apierrors.IsNotFound(err):
		return problem{http.StatusNotFound, fmt.Sprintf("%s %q not found in namespace %q.", kindOf(act.Resource), act.Name, act.Namespace), false}
	case apierrors.IsAlreadyExists(err):
		return problem{http.StatusConflict, fmt.Sprintf("An APIKey named %q already exists in namespace %q. Choose another name.", act.Name, act.Namespace), false}
	case apierrors.IsInvalid(err):
		return problem{http.StatusUnprocessableEntity, "The API server refused the change: " + statusMessage(err), false}
	case apierrors.IsConflict(err):
		return problem{http.StatusConflict, "APIKey " + act.Name + " changed meanwhile. Reload and try again.", false}
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return problem{http.StatusGatewayTimeout, "The API server did not answer in time. Try again.", false}
	default:
		return problem{http.StatusBadGateway, "The request to the API server failed: " + err.Error(), false}
	}
}

// statusMessage is the API server's own explanation, which for CEL rules is written for people.
func statusMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

func qualified(resource, group string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

func kindOf(resource string) string {
	switch resource {
	case "apikeys":
		return "APIKey"
	case "connections":
		return "Connection"
	case "secrets":
		return "Secret"
	default:
		return resource
	}
}
