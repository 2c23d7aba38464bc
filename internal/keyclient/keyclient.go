// Package keyclient is the client side of switchboard's key protocol, shared by the kubectl
// plugin and the web panel so that both make the same decisions: which permissions each
// operation needs (checked first, with SelfSubjectAccessReviews), how to create, rotate, reveal
// and revoke a key, how long to wait for the operator, how to claim a one-time reveal so that
// exactly one claimer ever gets it, and what one word sums up a key's state.
//
// Every call is made with the caller's client, and so with the caller's own Kubernetes
// identity: RBAC decides what they may do. Errors are typed (ForbiddenError, TimeoutError,
// RefusedError, AbandonedError, ClaimLostError, RequestedElsewhereError, SupersededError,
// APIError) so that each view words them its own way; no error ever carries a key.
//
// Three decisions are made here once for both views:
//   - A key nobody could be shown does not outlive the command that made it: when Create cannot
//     hand over the key it issued (the operator did not answer in time, or someone else claimed
//     it first), it deletes the APIKey again.
//   - A key someone else claimed does not keep working: when Rotate loses the claim of the key
//     it asked for, it rotates again at once with no grace, so the key the other claimer holds
//     stops working, and says so (Issued.Stolen).
//   - Only the requester of a rotation claims its key: the caller whose own write put the
//     request in the spec (written with a resourceVersion precondition, so there is one). A
//     copy of a request already made (a form posted twice, two tabs) gets a
//     RequestedElsewhereError and changes nothing, rather than racing the requester for the
//     key and stopping it as stolen.
package keyclient

import (
	"context"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// DefaultPollInterval is how often an APIKey is read while waiting for the operator. A poll
// (rather than a watch) needs only the "get" permission every operation needs anyway.
const DefaultPollInterval = 200 * time.Millisecond

// Options configure a Client. The zero value is usable.
type Options struct {
	// Clock tells the time for rotation requests and key states (default the real clock).
	Clock clock.PassiveClock
	// PollInterval is how often an APIKey is read while waiting (default DefaultPollInterval).
	PollInterval time.Duration
	// Claimer claims one-time reveals instead of the Client's own identity (default: nil, the
	// Client reads and deletes the reveal Secret itself).
	Claimer Claimer
}

// Client runs the key workflow with one identity's client.
type Client struct {
	c       client.Client
	clock   clock.PassiveClock
	poll    time.Duration
	claimer Claimer
}

// New returns a Client that acts through c, with c's identity.
func New(c client.Client, opts Options) *Client {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	return &Client{c: c, clock: opts.Clock, poll: opts.PollInterval, claimer: opts.Claimer}
}

// Issued is the outcome of an operation that hands over a key.
type Issued struct {
	// APIKey is the APIKey as last read, at the generation of the key handed over.
	APIKey *switchboardv1alpha1.APIKey
	// Revealed is the claimed key; empty when the key is delivered into spec.secretName.
	Revealed Revealed
	// Replaced is the hint of the key a rotation replaced.
	Replaced string
	// Stolen are the hints of keys this rotation issued that someone else claimed first. Each
	// was stopped by rotating again with no grace, which also ended the previous key's grace
	// (only one previous key is kept). Views must say so loudly.
	Stolen []string
}

// Delivered reports that the key is in the APIKey's delivery Secret rather than revealed.
func (i *Issued) Delivered() bool { return i.APIKey.Spec.SecretName != "" }

// Hint identifies the handed-over key.
func (i *Issued) Hint() string {
	if i.Revealed.Hint != "" {
		return i.Revealed.Hint
	}
	return i.APIKey.Status.KeyHint
}

// PreviousValidUntil is when the replaced key stops working, or nil when it already has.
func (i *Issued) PreviousValidUntil(now time.Time) *time.Time {
	v := i.APIKey.Status.PreviousKeyValidUntil
	if v == nil || !now.Before(v.Time) {
		return nil
	}
	t := v.UTC()
	return &t
}

// Get reads an APIKey.
func (k *Client) Get(ctx context.Context, namespace, name string) (*switchboardv1alpha1.APIKey, error) {
	var key switchboardv1alpha1.APIKey
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &key); err != nil {
		return nil, apiError(err, APIKeys.verb("get"), namespace, name)
	}
	return &key, nil
}
