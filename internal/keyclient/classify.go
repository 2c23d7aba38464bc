package keyclient

import (
	"context"
	"errors"
	"net/url"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The errors of the key workflow, and of the API calls around it, classified once: the plugin
// and the panel switch on a Problem's Kind and only word it, each in its own voice.

// Kind is what went wrong.
type Kind int

const (
	// KindOther is an error nothing below describes; its own text is the wording.
	KindOther Kind = iota
	// KindUnauthorized means the API server did not accept the caller's credentials.
	KindUnauthorized
	// KindForbidden means RBAC refused a call (User, Call.Verb and Call.Resource say which, from the
	// API server's own message where it said), or a check found permissions missing (Missing).
	KindForbidden
	// KindNotFound means the object of Call was not found.
	KindNotFound
	// KindAlreadyExists means the object of Call exists already.
	KindAlreadyExists
	// KindConflict means the object of Call changed meanwhile.
	KindConflict
	// KindInvalid means the API server refused the change; Message is its explanation.
	KindInvalid
	// KindAPITimeout means the API server did not answer in time.
	KindAPITimeout
	// KindUnreachable means no answer at all came from the API server at Message (scheme and host).
	KindUnreachable
	// KindOperatorTimeout means the operator did not do in time what the workflow waited for.
	KindOperatorTimeout
	// KindRefused means the APIKey can no longer hand over a key (revoked, expired, deleting, a
	// delivery conflict).
	KindRefused
	// KindClaimLost means someone else claimed a rotation's new keys first; Cause is why the next
	// key could not be handed over, when that is what ended it.
	KindClaimLost
	// KindAlreadyRotated means the rotation was carried out already, and its key handed over.
	KindAlreadyRotated
	// KindRequestedElsewhere means the rotation was requested by another caller.
	KindRequestedElsewhere
	// KindSuperseded means the rotation asked for was replaced before its key could be handed over.
	KindSuperseded
	// KindAlreadyClaimed means someone else claimed the key (or its reveal expired) first.
	KindAlreadyClaimed
	// KindRevealExpired means nobody claimed the key in time.
	KindRevealExpired
	// KindNotPublished means the APIKey has no key waiting to be claimed.
	KindNotPublished
	// KindAbandoned means a Create could not hand over its key and deleted the APIKey again (unless
	// DeleteCause says why it could not); Cause is why.
	KindAbandoned
)

// Call is an API call as the wording of its failure names it.
type Call struct {
	Verb      string
	Resource  Resource
	Namespace string
	// Name is the object's name, "" for a create or a list.
	Name string
}

// Problem is an error, classified.
type Problem struct {
	Kind Kind
	// Err is the error classified; NetErr, for KindUnreachable, the network error under its URL.
	Err, NetErr error
	// Call is the call that failed: the one the workflow named (an *APIError), else the one the
	// caller of Classify said it attempted.
	Call Call
	// User is the caller as the API server named them in a refusal ("" when it did not).
	User string
	// Missing are the permissions a check found missing (KindForbidden from Check).
	Missing []Permission
	// Message is the API server's explanation (KindInvalid), or its address (KindUnreachable).
	Message string
	// Cause and DeleteCause: see KindAbandoned and KindClaimLost.
	Cause, DeleteCause *Problem

	// The workflow's own errors, for the details their wording shows.
	Timeout            *TimeoutError
	Refused            *RefusedError
	ClaimLost          *ClaimLostError
	RequestedElsewhere *RequestedElsewhereError
	Claimed            *ClaimedError
	Abandoned          *AbandonedError
}

// refusalDetail pulls the user, verb, resource and group out of the API server's RBAC refusal:
// `User "system:serviceaccount:a:b" cannot create resource "apikeys" in API group
// "switchboard.dev" in the namespace "a"`.
var refusalDetail = regexp.MustCompile(`(?:User "([^"]*)" )?cannot (\S+) resource "([^"]+)"(?: in API group "([^"]*)")?`)

// Classify says what err is. call is the call the caller attempted, for an API error that
// does not say (the workflow's own *APIError does).
func Classify(err error, call Call) Problem {
	p := Problem{Err: err, Call: call}
	var (
		abandoned *AbandonedError
		forbidden *ForbiddenError
		apiErr    *APIError
		status    apierrors.APIStatus
		urlErr    *url.Error
	)
	switch {
	case errors.As(err, &abandoned):
		p.Kind, p.Abandoned = KindAbandoned, abandoned
		cause := Classify(abandoned.Cause, call)
		p.Cause = &cause
		if abandoned.DeleteErr != nil {
			d := Classify(abandoned.DeleteErr, call)
			p.DeleteCause = &d
		}
	case errors.As(err, &forbidden):
		p.Kind, p.User, p.Missing = KindForbidden, forbidden.User, forbidden.Missing
		p.Call.Namespace = forbidden.Namespace
	case errors.As(err, &apiErr):
		return Classify(apiErr.Err, Call{Verb: apiErr.Permission.Verb, Resource: apiErr.Permission.Resource, Namespace: apiErr.Namespace, Name: apiErr.Name})
	case errors.As(err, &p.Timeout):
		p.Kind = KindOperatorTimeout
	case errors.As(err, &p.Refused):
		p.Kind = KindRefused
	case errors.As(err, &p.ClaimLost):
		p.Kind = KindClaimLost
		if p.ClaimLost.Next != nil {
			next := Classify(p.ClaimLost.Next, call)
			p.Cause = &next
		}
	case errors.Is(err, ErrAlreadyRotated):
		p.Kind = KindAlreadyRotated
	case errors.As(err, &p.RequestedElsewhere):
		p.Kind = KindRequestedElsewhere
	case errors.As(err, new(*SupersededError)):
		p.Kind = KindSuperseded
	case errors.Is(err, ErrAlreadyClaimed):
		p.Kind = KindAlreadyClaimed
		errors.As(err, &p.Claimed)
	case errors.Is(err, ErrRevealExpired):
		p.Kind = KindRevealExpired
	case errors.Is(err, ErrNotPublished):
		p.Kind = KindNotPublished
	case apierrors.IsUnauthorized(err):
		p.Kind = KindUnauthorized
	case apierrors.IsForbidden(err):
		p.Kind = KindForbidden
		if m := refusalDetail.FindStringSubmatch(err.Error()); m != nil {
			p.User, p.Call.Verb = m[1], m[2]
			p.Call.Resource.Plural, p.Call.Resource.Group = m[3], m[4]
		}
	case apierrors.IsNotFound(err):
		p.Kind = KindNotFound
	case apierrors.IsAlreadyExists(err):
		p.Kind = KindAlreadyExists
	case apierrors.IsInvalid(err):
		p.Kind, p.Message = KindInvalid, err.Error()
		if errors.As(err, &status) {
			p.Message = status.Status().Message
		}
	case apierrors.IsConflict(err):
		p.Kind = KindConflict
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		p.Kind = KindAPITimeout
	case errors.As(err, &urlErr):
		p.Kind, p.NetErr, p.Message = KindUnreachable, urlErr.Err, urlErr.URL
		if u, perr := url.Parse(urlErr.URL); perr == nil {
			p.Message = u.Scheme + "://" + u.Host
		}
	}
	return p
}
