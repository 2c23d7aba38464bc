package panel

import (
	"fmt"
	"net/http"
	"strings"

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

// describe turns an error of act into one clear line. keyclient classifies it (Classify); this
// only words it. It never includes request bodies, so no key can leak through it; the API
// server's messages never contain the bearer token.
func describe(err error, act action) problem {
	return word(keyclient.Classify(err, keyclient.Call{Verb: act.Verb,
		Resource: keyclient.Resource{Group: act.Group, Plural: act.Resource, Kind: kindOf(act.Resource)}, Namespace: act.Namespace, Name: act.Name}), act)
}

// word is the panel's wording of a classified problem.
func word(p keyclient.Problem, act action) problem {
	call := p.Call
	switch p.Kind {
	case keyclient.KindAbandoned:
		out := word(*p.Cause, act)
		if out.SignedOut {
			return out
		}
		name := p.Abandoned.Name
		switch p.Cause.Kind {
		case keyclient.KindOperatorTimeout:
			out.Message = timeoutMessage(p.Cause.Timeout)
		case keyclient.KindAlreadyClaimed:
			out.Message = "Someone else claimed the key of “" + name + "” before it could be shown to you."
		}
		out.Message = strings.TrimSuffix(out.Message, ".") + ". "
		if p.DeleteCause != nil {
			out.Message += "The APIKey “" + name + "” was created, but deleting it again failed (" + word(*p.DeleteCause, act).Message + "): delete it yourself."
		} else {
			out.Message += "The APIKey “" + name + "” was deleted again, so no key is left that nobody saw or that someone else holds; create it again."
		}
		return out
	case keyclient.KindForbidden:
		if len(p.Missing) > 0 {
			first := p.Missing[0]
			grants := make([]string, 0, len(p.Missing))
			for _, m := range p.Missing {
				grants = append(grants, fmt.Sprintf("%q on %s", m.Verb, m.Resource))
			}
			return problem{Status: http.StatusForbidden, Message: fmt.Sprintf(
				"Forbidden: you may not %s %s in namespace %q, which this needs; nothing was changed. Ask an administrator for a Role granting %s.",
				first.Verb, first.Resource, call.Namespace, strings.Join(grants, ", "))}
		}
		return problem{http.StatusForbidden, fmt.Sprintf(
			"Forbidden: you may not %s %s in namespace %q. Ask an administrator for a Role granting %q on %s.",
			call.Verb, call.Resource, call.Namespace, call.Verb, call.Resource), false}
	case keyclient.KindUnauthorized:
		return problem{http.StatusUnauthorized, "The API server no longer accepts your token. Sign in again.", true}
	case keyclient.KindNotFound:
		return problem{http.StatusNotFound, fmt.Sprintf("%s %q not found in namespace %q.", kindOf(call.Resource.Plural), call.Name, call.Namespace), false}
	case keyclient.KindAlreadyExists:
		return problem{http.StatusConflict, fmt.Sprintf("An APIKey named %q already exists in namespace %q. Choose another name.", call.Name, call.Namespace), false}
	case keyclient.KindInvalid:
		return problem{http.StatusUnprocessableEntity, "The API server refused the change: " + p.Message, false}
	case keyclient.KindConflict:
		return problem{http.StatusConflict, "APIKey " + call.Name + " changed meanwhile. Reload and try again.", false}
	case keyclient.KindAPITimeout:
		return problem{http.StatusGatewayTimeout, "The API server did not answer in time. Try again.", false}
	case keyclient.KindOperatorTimeout:
		return problem{Status: http.StatusGatewayTimeout, Message: timeoutMessage(p.Timeout) +
			" The rotation stays requested; its key can be shown from the table once the operator has issued it."}
	case keyclient.KindRefused:
		msg := "APIKey “" + p.Refused.Name + "” "
		switch p.Refused.State {
		case keyclient.StateRevoked:
			msg += "is revoked: its key cannot be shown or rotated. Create a new key instead."
		case keyclient.StateExpired:
			msg += "has expired: create a new key instead."
		case keyclient.StateDeleting:
			msg += "is being deleted."
		default:
			msg += "cannot deliver its key: " + p.Refused.Message
		}
		return problem{Status: http.StatusConflict, Message: msg}
	case keyclient.KindClaimLost:
		lost := p.ClaimLost
		if p.Cause != nil {
			next := word(*p.Cause, act)
			next.Message = "Someone else claimed the new key of “" + lost.Name + "” before you (" + strings.Join(lost.Stolen, ", ") +
				"). It was stopped by rotating again, so it no longer works, nor does the key it replaced. The next key could not be shown: " + next.Message
			return next
		}
		return problem{Status: http.StatusConflict, Message: "Someone else claimed the new key of “" + lost.Name + "” before you, every time (" +
			strings.Join(lost.Stolen, ", ") + "). " + lostOutcome(lost)}
	case keyclient.KindAlreadyRotated:
		return problem{Status: http.StatusConflict, Message: "This rotation of “" + act.Name + "” was already carried out, and its key shown once. Rotate again to get a new key."}
	case keyclient.KindRequestedElsewhere:
		if p.RequestedElsewhere.Same {
			return problem{Status: http.StatusConflict, Message: "This rotation of “" + act.Name + "” was already requested by another submission of the same form (posted twice, or from another tab); " +
				"its new key is shown there only, so nothing was changed here. If you never saw that key, use Show key in the table once it is issued, or rotate again."}
		}
		return problem{Status: http.StatusConflict, Message: "Another rotation of “" + act.Name + "” was requested and is not carried out yet; its new key is for whoever requested it, " +
			"so nothing was changed. Rotate again once it is done."}
	case keyclient.KindSuperseded:
		return problem{Status: http.StatusConflict, Message: "The rotation of “" + act.Name + "” you asked for was replaced by another request before its key could be shown to you; " +
			"no key was shown here. Rotate again for a key of your own."}
	case keyclient.KindAlreadyClaimed:
		return problem{Status: http.StatusConflict, Message: "The key of " + act.Name + " was already shown (claimed by someone else, or its reveal expired). Rotate the key to get a new one."}
	case keyclient.KindRevealExpired:
		return problem{Status: http.StatusConflict, Message: "Nobody claimed the key of " + act.Name + " in time and its reveal expired (the key still works). Rotate the key to get a new one."}
	case keyclient.KindNotPublished:
		return problem{Status: http.StatusConflict, Message: "APIKey " + act.Name + " has no key waiting to be shown. Rotate it to get a new one."}
	}
	return problem{http.StatusBadGateway, "The request to the API server failed: " + p.Err.Error(), false}
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
