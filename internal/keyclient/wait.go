package keyclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// ErrTimeout marks giving up on waiting for the operator.
var ErrTimeout = errors.New("timed out waiting for the operator")

// TimeoutError is the operator not doing in time what an operation waited for.
type TimeoutError struct {
	Namespace, Name string
	After           time.Duration
	// What the operator has not done: "issued the key", "issued the new key".
	What string
	// Progress says how far the operator got ("Ready=False, reason Issuing").
	Progress string
	// SecretName is the APIKey's delivery Secret as last read; "" for a key revealed once.
	SecretName string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%v after %s: the operator has not %s for APIKey %q in namespace %q (%s); the switchboard operator may not be running (check its pods, by default in namespace %q)",
		ErrTimeout, e.After, e.What, e.Name, e.Namespace, e.Progress, switchboardv1alpha1.DefaultSystemNamespace)
}

// Is makes errors.Is(err, ErrTimeout) true.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// RefusedError is an APIKey that can no longer hand over a key: revoked, expired, being
// deleted, or its delivery Secret taken by a Secret switchboard does not manage.
type RefusedError struct {
	Name  string
	State KeyState
	// Message is the operator's explanation (for DeliveryConflict).
	Message string
}

func (e *RefusedError) Error() string {
	switch e.State {
	case StateDeleting:
		return fmt.Sprintf("APIKey %q is being deleted", e.Name)
	case StateRevoked:
		return fmt.Sprintf("APIKey %q is revoked; create a new APIKey instead", e.Name)
	case StateExpired:
		return fmt.Sprintf("APIKey %q has expired; create a new APIKey instead", e.Name)
	}
	return fmt.Sprintf("APIKey %q cannot deliver its key: %s", e.Name, e.Message)
}

// refusal returns a *RefusedError when the APIKey can no longer become usable. A delivery
// conflict counts only when the operator reported it for the current spec.
func refusal(k *switchboardv1alpha1.APIKey, now time.Time) error {
	switch s := State(k, now); s {
	case StateDeleting, StateRevoked, StateExpired:
		return &RefusedError{Name: k.Name, State: s}
	case StateDeliveryConflict:
		ready := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady)
		if ready.ObservedGeneration >= k.Generation {
			return &RefusedError{Name: k.Name, State: s, Message: ready.Message}
		}
	}
	return nil
}

// ErrRevealExpired means nobody claimed the key in time and its reveal Secret was deleted.
var ErrRevealExpired = errors.New("the key was never claimed and its reveal expired; rotate the key to get a new one")

// ClaimedError is a key whose one-time reveal somebody else claimed first.
type ClaimedError struct {
	Name string
	// Hint identifies the key the other claimer holds.
	Hint string
}

func (e *ClaimedError) Error() string {
	return fmt.Sprintf("APIKey %q: %v", e.Name, ErrAlreadyClaimed)
}

// Is makes errors.Is(err, ErrAlreadyClaimed) true.
func (e *ClaimedError) Is(target error) bool { return target == ErrAlreadyClaimed }

// showable is the wait condition of the operations that hand over a key: true once it can be
// claimed or was delivered, an error once it never will be.
func showable(k *switchboardv1alpha1.APIKey, now time.Time) (bool, error) {
	if err := refusal(k, now); err != nil {
		return false, err
	}
	switch RevealStatus(k) {
	case RevealClaimable, RevealDelivered:
		return true, nil
	case RevealGone:
		revealed := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed)
		if revealed.Reason == switchboardv1alpha1.ReasonRevealExpired {
			return false, fmt.Errorf("APIKey %q: %w", k.Name, ErrRevealExpired)
		}
		return false, &ClaimedError{Name: k.Name, Hint: k.Status.KeyHint}
	}
	return false, nil
}

// wait reads the APIKey every PollInterval until done reports true or an error, or until
// timeout passes (a *TimeoutError saying what the operator has not done). A read the API
// server refuses for good (not found, forbidden, unauthorized) ends the wait; any other failed
// read is a passing hiccup and is tried again.
func (k *Client) wait(ctx context.Context, key types.NamespacedName, timeout time.Duration, what string,
	done func(*switchboardv1alpha1.APIKey, time.Time) (bool, error),
) (*switchboardv1alpha1.APIKey, error) {
	var last *switchboardv1alpha1.APIKey
	var failed error
	check := func(ctx context.Context) (bool, error) {
		var got switchboardv1alpha1.APIKey
		if err := k.c.Get(ctx, key, &got); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				failed = apiError(err, APIKeys.verb("get"), key.Namespace, key.Name)
				return false, failed
			}
			return false, nil //nolint:nilerr // a passing hiccup of the API server, or the timeout striking during the read
		}
		last = &got
		ok, err := done(&got, k.clock.Now())
		failed = err
		return ok, err
	}
	// The APIKey as it is now is looked at however short the timeout: a key ready to hand over
	// needs no waiting.
	ok, err := check(ctx)
	if !ok && err == nil {
		err = wait.PollUntilContextTimeout(ctx, k.poll, timeout, false, check)
	}
	switch {
	case err == nil:
		return last, nil
	case failed != nil:
		return nil, failed
	case wait.Interrupted(err) && ctx.Err() == nil:
		e := &TimeoutError{Namespace: key.Namespace, Name: key.Name, After: timeout, What: what, Progress: progress(last)}
		if last != nil {
			e.SecretName = last.Spec.SecretName
		}
		return nil, e
	case ctx.Err() != nil:
		return nil, fmt.Errorf("interrupted while waiting for APIKey %q: %w", key.Name, context.Cause(ctx))
	}
	return nil, err
}

// progress says how far the operator got, for the timeout message.
func progress(k *switchboardv1alpha1.APIKey) string {
	if k == nil {
		return "the APIKey could not be read"
	}
	ready := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady)
	if ready == nil {
		return "no status yet"
	}
	return fmt.Sprintf("Ready=%s, reason %s", ready.Status, ready.Reason)
}
