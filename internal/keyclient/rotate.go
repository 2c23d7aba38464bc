package keyclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// ErrAlreadyRotated means the rotation asked for (its RequestedAt) was carried out already:
// a form posted twice rotates once. Rotate returns it as a *RequestedElsewhereError.
var ErrAlreadyRotated = errors.New("this rotation was already carried out, and its key handed over; rotate again for a new key")

// RotateRequest asks for one rotation.
type RotateRequest struct {
	// RequestedAt identifies the rotation (spec.rotation.requestedAt). Empty: the current time.
	// Asking again for a RequestedAt already requested (a form posted twice) neither requests
	// another rotation nor claims that one's key: it fails with a *RequestedElsewhereError,
	// which matches ErrAlreadyRotated too once that rotation was carried out.
	RequestedAt string
	// Grace is how long the replaced key keeps working; 0 stops it at once.
	Grace time.Duration
	// Timeout bounds the whole rotation, repetitions after a lost claim included, so that a
	// view answering within a deadline (the panel's write timeout) can rely on it.
	Timeout time.Duration
}

// maxRerotations is how many times a rotation whose key someone else claimed is repeated to
// hand over a key the caller alone holds.
const maxRerotations = 1

// ClaimLostError is a rotation whose new keys somebody else claimed first every time it was
// tried. Each stolen key was stopped by one more rotation with no grace; the key that last
// rotation issued waits, unseen, in its one-time reveal Secret.
type ClaimLostError struct {
	Namespace, Name string
	// Stolen are the hints of the keys the other claimer took, none of which works any more
	// (unless StopErr says the last one could not be stopped).
	Stolen []string
	// StopErr is why the last stolen key could not be stopped; nil when it was.
	StopErr error
	// Next is why the key of the rotation that stopped the stolen one could not be handed over
	// (the operator did not issue it in time, say); nil when it was stolen too.
	Next error
}

func (e *ClaimLostError) Error() string {
	if e.Next != nil {
		return fmt.Sprintf("someone else claimed the new key of APIKey %q first (%s); it was stopped by rotating again with no grace, so it no longer works, and neither does the key it replaced; the next key could not be handed over: %v",
			e.Name, strings.Join(e.Stolen, ", "), e.Next)
	}
	msg := fmt.Sprintf("someone else claimed the new key of APIKey %q first, %d times (%s): someone who may read and delete Secrets in namespace %q is taking its keys as they are issued",
		e.Name, len(e.Stolen), strings.Join(e.Stolen, ", "), e.Namespace)
	if e.StopErr != nil {
		return msg + fmt.Sprintf("; the last of them (%s) still works because rotating it away failed (%v): revoke the APIKey now", e.Stolen[len(e.Stolen)-1], e.StopErr)
	}
	return msg + "; each was stopped by rotating again with no grace, so none of them works, and neither does the key they replaced. Revoke the APIKey, or take away the others' access to Secrets in that namespace, before rotating again"
}

// Is makes errors.Is(err, ErrAlreadyClaimed) true.
func (e *ClaimLostError) Is(target error) bool { return target == ErrAlreadyClaimed }

// Rotate asks the operator for a new key for an APIKey, waits up to req.Timeout for it and
// hands it over; the replaced key keeps working for req.Grace. Permissions are checked before
// anything changes.
//
// When somebody else claims the new key first (someone who may read and delete the
// namespace's Secrets), that key must not keep working: Rotate rotates again at once with no
// grace, so the stolen key stops, and hands over the next key, listing the stolen hints in
// Issued.Stolen for the view to say so loudly. Only one previous key is kept, so the key that
// was replaced in the first place stops too, whatever grace was asked: a grace period cannot
// be kept for it without keeping the stolen key as well. If the next key is stolen as well,
// it too is stopped and Rotate fails with a *ClaimLostError.
//
// Only the caller whose own write requested the rotation claims its key and takes a lost claim
// for a theft. A rotation someone else requested — the same RequestedAt already in the spec (a
// form posted twice, two tabs showing one form), or another rotation still pending — is
// refused with a *RequestedElsewhereError, and nothing is changed or claimed: two copies of one
// request would otherwise race for one key, and the loser would stop, as stolen, the key the
// winner was just shown, and with it the replaced key's grace.
func (k *Client) Rotate(ctx context.Context, namespace, name string, req RotateRequest) (*Issued, error) {
	key, err := k.Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if err := refusal(key, k.clock.Now()); err != nil {
		return nil, err
	}
	if err := requestedElsewhere(key, req.RequestedAt); err != nil {
		return nil, err
	}
	if err := k.Check(ctx, namespace, Needs(OpRotate, key.Spec.SecretName != "")); err != nil {
		return nil, err
	}
	replaced := key.Status.KeyHint
	deadline := time.Now().Add(req.Timeout)
	var stolen []string
	for {
		issued, err := k.rotateOnce(ctx, key, req, len(stolen) > 0, time.Until(deadline))
		var claimed *ClaimedError
		switch {
		case err == nil:
			issued.Stolen, issued.Replaced = stolen, replaced
			return issued, nil
		case !errors.As(err, &claimed) && len(stolen) > 0:
			return nil, &ClaimLostError{Namespace: namespace, Name: name, Stolen: stolen, Next: err}
		case !errors.As(err, &claimed):
			return nil, err
		}
		stolen = append(stolen, claimed.Hint)
		if key, err = k.Get(ctx, namespace, name); err != nil {
			return nil, fmt.Errorf("%w; reading the APIKey again to stop the stolen key failed: %w", claimed, err)
		}
		req = RotateRequest{Timeout: req.Timeout} // no grace: the stolen key stops now
		if len(stolen) > maxRerotations {
			_, stopErr := k.requestRotation(ctx, key, req, true)
			return nil, &ClaimLostError{Namespace: namespace, Name: name, Stolen: stolen, StopErr: stopErr}
		}
	}
}

// rotateOnce requests one rotation of key (as last read) and hands over its key, waiting up
// to timeout; stop marks the rotation that stops a stolen key (see requestRotation).
func (k *Client) rotateOnce(ctx context.Context, key *switchboardv1alpha1.APIKey, req RotateRequest, stop bool, timeout time.Duration) (*Issued, error) {
	previous := key.Status.KeyGeneration
	requestedAt, err := k.requestRotation(ctx, key, req, stop)
	if err != nil {
		return nil, err
	}
	return k.handOver(ctx, key, timeout, "issued the new key", func(got *switchboardv1alpha1.APIKey, now time.Time) (bool, error) {
		if got.Status.LastHandledRotationAt == requestedAt && got.Status.KeyGeneration > previous {
			return showable(got, now)
		}
		if err := refusal(got, now); err != nil {
			return false, err
		}
		// Not carried out, and no longer asked for: it never will be. (Once carried out, a
		// later request does not matter until it too is carried out, replacing the key.)
		if got.Spec.Rotation == nil || got.Spec.Rotation.RequestedAt != requestedAt {
			by := ""
			if got.Spec.Rotation != nil {
				by = got.Spec.Rotation.RequestedAt
			}
			return false, &SupersededError{Namespace: got.Namespace, Name: got.Name, RequestedAt: requestedAt, By: by}
		}
		return false, nil
	})
}
