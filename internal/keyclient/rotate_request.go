package keyclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Who requested a rotation. Rotate claims the key of a rotation only when this very call wrote
// its request, and only then takes a lost claim for a theft: two copies of one request (a form
// posted twice, two tabs, two commands at once) must not both wait for the key, or the one that
// lost the claim would stop, as stolen, the key the other was just shown.

// ErrRequestedElsewhere means the rotation was requested by another caller, not by this call.
var ErrRequestedElsewhere = errors.New("this rotation was requested by another caller, and its new key is handed to that caller only")

// RequestedElsewhereError is a rotation this call did not request: its RequestedAt was in the
// spec already (the same request sent twice: a form posted twice, a reload, two tabs with one
// form) or another rotation, not carried out yet, was. Nothing was changed and nothing claimed:
// the key of that rotation belongs to whoever requested it.
type RequestedElsewhereError struct {
	Namespace, Name string
	// RequestedAt is the request found (spec.rotation.requestedAt, or the one carried out).
	RequestedAt string
	// Same reports that it is the very request this call asked for (RotateRequest.RequestedAt).
	Same bool
	// CarriedOut reports that the operator carried that request out already; errors.Is then
	// matches ErrAlreadyRotated too.
	CarriedOut bool
}

func (e *RequestedElsewhereError) Error() string {
	switch {
	case e.CarriedOut:
		return fmt.Sprintf("APIKey %q: %v", e.Name, ErrAlreadyRotated)
	case e.Same:
		return fmt.Sprintf("APIKey %q: this very rotation (requestedAt %s) was already requested by another caller (the same request sent twice, a form posted twice, say); "+
			"its new key is shown to that caller only, so nothing was changed and no key was claimed here. If you never saw that key, reveal it once it is issued, or rotate again",
			e.Name, e.RequestedAt)
	}
	return fmt.Sprintf("APIKey %q: another rotation (requestedAt %s) was requested and is not carried out yet; its new key is for whoever requested it, "+
		"so nothing was changed: rotate again once it is done (if it stays pending, the switchboard operator may not be running)", e.Name, e.RequestedAt)
}

// Is makes errors.Is(err, ErrRequestedElsewhere) true, and ErrAlreadyRotated for a request
// carried out already.
func (e *RequestedElsewhereError) Is(target error) bool {
	return target == ErrRequestedElsewhere || e.CarriedOut && target == ErrAlreadyRotated
}

// SupersededError is a rotation this call requested that was replaced by another request (a
// later rotation, or a hand edit of spec.rotation) before its key could be handed over. Its key
// was not claimed here; the APIKey's current key belongs to whoever requested the other one.
type SupersededError struct {
	Namespace, Name string
	// RequestedAt is this call's request; By the one now in the spec ("" when it was removed).
	RequestedAt, By string
}

func (e *SupersededError) Error() string {
	by := "was withdrawn (spec.rotation removed)"
	if e.By != "" {
		by = "was replaced by another request (requestedAt " + e.By + ")"
	}
	return fmt.Sprintf("APIKey %q: the rotation requested here (requestedAt %s) %s before its key could be handed over; "+
		"no key was claimed here: rotate again for a key of your own", e.Name, e.RequestedAt, by)
}

// requestedElsewhere refuses a rotation request want ("" for a fresh one) that this call would
// not be the requester of: want carried out already, or any rotation still pending (want itself
// or another one). Pure, so that it can be tested on its own.
func requestedElsewhere(key *switchboardv1alpha1.APIKey, want string) error {
	if want != "" && key.Status.LastHandledRotationAt == want {
		return &RequestedElsewhereError{Namespace: key.Namespace, Name: key.Name, RequestedAt: want, Same: true, CarriedOut: true}
	}
	if rotationPending(key) {
		at := key.Spec.Rotation.RequestedAt
		return &RequestedElsewhereError{Namespace: key.Namespace, Name: key.Name, RequestedAt: at, Same: at == want}
	}
	return nil
}

// maxRequestConflicts bounds how often a rotation request is written again after the APIKey
// changed between reading and writing it (the operator updating its status, say).
const maxRequestConflicts = 5

// requestRotation sets spec.rotation and returns the requestedAt to wait for. The write carries
// the resourceVersion read as a precondition, so of two callers writing at once exactly one
// succeeds; the other reads the APIKey again and finds the request there (requestedElsewhere).
// So a caller is the requester exactly when its own write put the request in the spec. A stop
// (the rotation that stops a stolen key) replaces a pending request instead of refusing it:
// the stolen key must stop whoever else is rotating.
func (k *Client) requestRotation(ctx context.Context, key *switchboardv1alpha1.APIKey, req RotateRequest, stop bool) (string, error) {
	for conflicts := 0; ; conflicts++ {
		if !stop {
			if err := requestedElsewhere(key, req.RequestedAt); err != nil {
				return "", err
			}
		}
		requestedAt := req.RequestedAt
		if requestedAt == "" {
			requestedAt = k.freshRequestedAt(key)
		}
		before := key.DeepCopy()
		key.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: requestedAt, GracePeriod: metav1.Duration{Duration: req.Grace}}
		err := k.c.Patch(ctx, key, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			return requestedAt, nil
		}
		if !apierrors.IsConflict(err) || conflicts >= maxRequestConflicts {
			return "", apiError(err, APIKeys.verb("patch"), key.Namespace, key.Name)
		}
		if key, err = k.Get(ctx, key.Namespace, key.Name); err != nil {
			return "", err
		}
		if err := refusal(key, k.clock.Now()); err != nil {
			return "", err
		}
	}
}

// freshRequestedAt is the current time, told apart from the last rotation's token should the
// clock not have moved (a coarse or fake clock).
func (k *Client) freshRequestedAt(key *switchboardv1alpha1.APIKey) string {
	at := k.clock.Now().UTC().Format(time.RFC3339Nano)
	for n := 2; key.Spec.Rotation != nil && key.Spec.Rotation.RequestedAt == at || key.Status.LastHandledRotationAt == at; n++ {
		at = fmt.Sprintf("%s#%d", k.clock.Now().UTC().Format(time.RFC3339Nano), n)
	}
	return at
}
