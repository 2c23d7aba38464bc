package plugin

import (
	"errors"
	"fmt"
	"strings"

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
	plural, group, _ := strings.Cut(a.resource, ".")
	return word(err, keyclient.Classify(err, keyclient.Call{Verb: a.verb,
		Resource: keyclient.Resource{Group: group, Plural: plural, Kind: a.kind}, Namespace: a.namespace, Name: a.name}))
}

// explainKey words an error of the key workflow as one line: a permission check that failed,
// a call the API server refused (see explain), or the workflow's own errors as they are.
func explainKey(err error) error {
	if err == nil {
		return nil
	}
	return word(err, keyclient.Classify(err, keyclient.Call{}))
}

// word is the plugin's wording of err, classified as p (keyclient.Classify): keyclient
// classifies, this only words.
func word(err error, p keyclient.Problem) error {
	call := p.Call
	switch p.Kind {
	case keyclient.KindAbandoned:
		name := p.Abandoned.Name
		cause := word(p.Abandoned.Cause, *p.Cause)
		if p.Cause.Claimed != nil {
			cause = fmt.Errorf("the key of APIKey %q%s was already claimed by someone else before you", p.Cause.Claimed.Name, hintSuffix(p.Cause.Claimed.Hint))
		}
		if p.DeleteCause != nil {
			return fmt.Errorf("%w; the APIKey %q was left in place because deleting it failed: %s", cause, name, oneLine(word(p.Abandoned.DeleteErr, *p.DeleteCause).Error()))
		}
		return fmt.Errorf("%w; the APIKey %q was deleted again, so no key is left that someone else holds or nobody saw; nothing was kept", cause, name)
	case keyclient.KindForbidden:
		who := "you"
		if p.User != "" {
			who = fmt.Sprintf("you (%s)", p.User)
		}
		if len(p.Missing) > 0 {
			missing := keyclient.JoinPermissions(p.Missing)
			return fmt.Errorf("%w: %s may not %s in namespace %q (needed to %s); ask a cluster administrator for a Role that grants %s; nothing was changed",
				ErrForbidden, who, missing, call.Namespace, p.Missing[0].Purpose, missing)
		}
		where := ""
		if call.Namespace != "" {
			where = fmt.Sprintf(" in namespace %q", call.Namespace)
		}
		return fmt.Errorf("%w: %s may not %s %s%s; ask a cluster administrator for a Role that grants %q on %q",
			ErrForbidden, who, call.Verb, call.Resource, where, call.Verb, call.Resource)
	case keyclient.KindNotFound:
		if call.Name != "" {
			return fmt.Errorf("%s %q not found in namespace %q", call.Resource.Kind, call.Name, call.Namespace)
		}
	case keyclient.KindInvalid:
		return fmt.Errorf("the API server refused the %s: %s", call.Resource.Kind, p.Message)
	case keyclient.KindUnauthorized:
		return errors.New("the Kubernetes API server did not accept your credentials (Unauthorized): check your kubeconfig, or log in again")
	case keyclient.KindUnreachable:
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %w", p.Message, p.NetErr)
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
