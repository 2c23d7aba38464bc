package panel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// action is what the panel tried, in RBAC terms, so that a refusal can name the permission.
// Errors of the key workflow name their own call (keyclient.APIError); for them only
// Namespace and Name are read, to word the workflow's other errors.
type action struct {
	Verb      string // get, list, create, patch, delete
	Resource  string // apikeys, secrets, connections, namespaces
	Group     string // "" for the core group
	Namespace string
	Name      string
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
	if p, ok := describeWorkflow(err, act); ok {
		return p
	}
	switch {
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

// describeWorkflow words the key workflow's own errors; ok is false for any other error.
func describeWorkflow(err error, act action) (problem, bool) {
	var (
		abandoned *keyclient.AbandonedError
		forbidden *keyclient.ForbiddenError
		apiErr    *keyclient.APIError
		timeout   *keyclient.TimeoutError
		refused   *keyclient.RefusedError
		lost      *keyclient.ClaimLostError
		elsewhere *keyclient.RequestedElsewhereError
		replaced  *keyclient.SupersededError
	)
	switch {
	case errors.As(err, &abandoned):
		p := describe(abandoned.Cause, act)
		if p.SignedOut {
			return p, true
		}
		switch {
		case errors.As(abandoned.Cause, &timeout):
			p.Message = timeoutMessage(timeout)
		case errors.Is(abandoned.Cause, keyclient.ErrAlreadyClaimed):
			p.Message = "Someone else claimed the key of “" + abandoned.Name + "” before it could be shown to you."
		}
		p.Message = strings.TrimSuffix(p.Message, ".") + ". "
		if abandoned.DeleteErr != nil {
			p.Message += "The APIKey “" + abandoned.Name + "” was created, but deleting it again failed (" + describe(abandoned.DeleteErr, act).Message + "): delete it yourself."
		} else {
			p.Message += "The APIKey “" + abandoned.Name + "” was deleted again, so no key is left that nobody saw or that someone else holds; create it again."
		}
		return p, true
	case errors.As(err, &forbidden):
		first := forbidden.Missing[0]
		grants := make([]string, 0, len(forbidden.Missing))
		for _, m := range forbidden.Missing {
			grants = append(grants, fmt.Sprintf("%q on %s", m.Verb, m.Resource))
		}
		return problem{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"Forbidden: you may not %s %s in namespace %q, which this needs; nothing was changed. Ask an administrator for a Role granting %s.",
			first.Verb, first.Resource, forbidden.Namespace, strings.Join(grants, ", "))}, true
	case errors.As(err, &apiErr):
		p := apiErr.Permission
		return describe(apiErr.Err, action{Verb: p.Verb, Resource: p.Resource.Plural, Group: p.Resource.Group, Namespace: apiErr.Namespace, Name: apiErr.Name}), true
	case errors.As(err, &timeout):
		return problem{Status: http.StatusGatewayTimeout, Message: timeoutMessage(timeout) +
			" The rotation stays requested; its key can be shown from the table once the operator has issued it."}, true
	case errors.As(err, &refused):
		msg := "APIKey “" + refused.Name + "” "
		switch refused.State {
		case keyclient.StateRevoked:
			msg += "is revoked: its key cannot be shown or rotated. Create a new key instead."
		case keyclient.StateExpired:
			msg += "has expired: create a new key instead."
		case keyclient.StateDeleting:
			msg += "is being deleted."
		default:
			msg += "cannot deliver its key: " + refused.Message
		}
		return problem{Status: http.StatusConflict, Message: msg}, true
	case errors.As(err, &lost) && lost.Next != nil:
		next := describe(lost.Next, act)
		next.Message = "Someone else claimed the new key of “" + lost.Name + "” before you (" + strings.Join(lost.Stolen, ", ") +
			"). It was stopped by rotating again, so it no longer works, nor does the key it replaced. The next key could not be shown: " + next.Message
		return next, true
	case errors.As(err, &lost):
		return problem{Status: http.StatusConflict, Message: "Someone else claimed the new key of “" + lost.Name + "” before you, every time (" +
			strings.Join(lost.Stolen, ", ") + "). " + lostOutcome(lost)}, true
	case errors.Is(err, keyclient.ErrAlreadyRotated):
		return problem{Status: http.StatusConflict, Message: "This rotation of “" + act.Name + "” was already carried out, and its key shown once. Rotate again to get a new key."}, true
	case errors.As(err, &elsewhere) && elsewhere.Same:
		return problem{Status: http.StatusConflict, Message: "This rotation of “" + act.Name + "” was already requested by another submission of the same form (posted twice, or from another tab); " +
			"its new key is shown there only, so nothing was changed here. If you never saw that key, use Show key in the table once it is issued, or rotate again."}, true
	case errors.As(err, &elsewhere):
		return problem{Status: http.StatusConflict, Message: "Another rotation of “" + act.Name + "” was requested and is not carried out yet; its new key is for whoever requested it, " +
			"so nothing was changed. Rotate again once it is done."}, true
	case errors.As(err, &replaced):
		return problem{Status: http.StatusConflict, Message: "The rotation of “" + act.Name + "” you asked for was replaced by another request before its key could be shown to you; " +
			"no key was shown here. Rotate again for a key of your own."}, true
	case errors.Is(err, keyclient.ErrAlreadyClaimed):
		return problem{Status: http.StatusConflict, Message: "The key of " + act.Name + " was already shown (claimed by someone else, or its reveal expired). Rotate the key to get a new one."}, true
	case errors.Is(err, keyclient.ErrRevealExpired):
		return problem{Status: http.StatusConflict, Message: "Nobody claimed the key of " + act.Name + " in time and its reveal expired (the key still works). Rotate the key to get a new one."}, true
	case errors.Is(err, keyclient.ErrNotPublished):
		return problem{Status: http.StatusConflict, Message: "APIKey " + act.Name + " has no key waiting to be shown. Rotate it to get a new one."}, true
	}
	return problem{}, false
}

// timeoutMessage says the operator did not answer in time.
func timeoutMessage(e *keyclient.TimeoutError) string {
	return fmt.Sprintf("Timed out after %s waiting for the operator to issue the key of APIKey “%s”: the switchboard operator may not be running.", e.After, e.Name)
}

// lostOutcome says what became of keys someone else kept claiming.
func lostOutcome(e *keyclient.ClaimLostError) string {
	if e.StopErr != nil {
		return "The last of them still works because rotating it away failed: revoke the key now."
	}
	return "Each was stopped by rotating again, so none of them works, nor does the key they replaced. " +
		"Someone who may read and delete Secrets in this namespace is taking its keys: revoke the key, or take that access away, before rotating again."
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
