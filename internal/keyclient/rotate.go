package keyclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// ErrAlreadyRotated means the rotation asked for (its RequestedAt) was carried out already:
// a form posted twice rotates once.
var ErrAlreadyRotated = errors.New("this rotation was already carried out, and its key handed over; rotate again for a new key")

// RotateRequest asks for one rotation.
type RotateRequest struct {
	// RequestedAt identifies the rotation (spec.rotation.requestedAt). Empty: the current time.
	// Asking again for a RequestedAt already requested waits for that rotation instead of
	// requesting another one; one already carried out is refused with ErrAlreadyRotated.
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
func (k *Client) Rotate(ctx context.Context, namespace, name string, req RotateRequest) (*Issued, error) {
	key, err := k.Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if err := refusal(key, k.clock.Now()); err != nil {
		return nil, err
	}
	if req.RequestedAt != "" && key.Status.LastHandledRotationAt == req.RequestedAt {
		return nil, ErrAlreadyRotated
	}
	if err := k.Check(ctx, namespace, Needs(OpRotate, key.Spec.SecretName != "")); err != nil {
		return nil, err
	}
	replaced := key.Status.KeyHint
	deadline := time.Now().Add(req.Timeout)
	var stolen []string
	for {
		issued, err := k.rotateOnce(ctx, key, req, time.Until(deadline))
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
			_, stopErr := k.requestRotation(ctx, key, req)
			return nil, &ClaimLostError{Namespace: namespace, Name: name, Stolen: stolen, StopErr: stopErr}
		}
	}
}

// rotateOnce requests one rotation of key (as last read) and hands over its key, waiting up
// to timeout.
func (k *Client) rotateOnce(ctx context.Context, key *switchboardv1alpha1.APIKey, req RotateRequest, timeout time.Duration) (*Issued, error) {
	previous := key.Status.KeyGeneration
	requestedAt, err := k.requestRotation(ctx, key, req)
	if err != nil {
		return nil, err
	}
	return k.handOver(ctx, key, timeout, "issued the new key", func(got *switchboardv1alpha1.APIKey, now time.Time) (bool, error) {
		if got.Status.LastHandledRotationAt != requestedAt || got.Status.KeyGeneration <= previous {
			return false, refusal(got, now)
		}
		return showable(got, now)
	})
}

// requestRotation sets spec.rotation, unless it asks for req.RequestedAt already, and returns
// the requestedAt to wait for.
func (k *Client) requestRotation(ctx context.Context, key *switchboardv1alpha1.APIKey, req RotateRequest) (string, error) {
	requestedAt := req.RequestedAt
	if requestedAt == "" {
		requestedAt = k.freshRequestedAt(key)
	}
	if key.Spec.Rotation != nil && key.Spec.Rotation.RequestedAt == requestedAt {
		return requestedAt, nil
	}
	before := key.DeepCopy()
	key.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: requestedAt, GracePeriod: metav1.Duration{Duration: req.Grace}}
	if err := k.c.Patch(ctx, key, client.MergeFrom(before)); err != nil {
		return "", apiError(err, APIKeys.verb("patch"), key.Namespace, key.Name)
	}
	return requestedAt, nil
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
