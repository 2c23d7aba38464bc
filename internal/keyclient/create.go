package keyclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// abandonTimeout bounds the deletion of an APIKey whose key could not be handed over; it runs
// even when the operation's own context was cancelled (an interrupted command).
const abandonTimeout = 10 * time.Second

// AbandonedError is a Create that could not hand over the key it made, and so deleted the
// APIKey again: a key nobody was shown (or that someone else claimed) does not outlive the
// command that made it.
type AbandonedError struct {
	Namespace, Name string
	// Cause is why the key could not be handed over.
	Cause error
	// DeleteErr is why the APIKey could not be deleted; nil when it was.
	DeleteErr error
}

func (e *AbandonedError) Error() string {
	if e.DeleteErr != nil {
		return fmt.Sprintf("%v; the APIKey %q was left in place because deleting it failed: %v", e.Cause, e.Name, e.DeleteErr)
	}
	return fmt.Sprintf("%v; the APIKey %q was deleted again, nothing was kept", e.Cause, e.Name)
}

func (e *AbandonedError) Unwrap() error { return e.Cause }

// Create creates key (namespace, name and spec set), waits up to timeout for the operator to
// issue its key and hands the key over: claimed from its one-time reveal, or delivered into
// spec.secretName. Every permission this needs is checked before anything is created. Once
// the APIKey exists, any failure to hand its key over (the operator did not answer in time,
// someone else claimed the key first, the claim was refused) deletes the APIKey again and
// returns an *AbandonedError.
func (k *Client) Create(ctx context.Context, key *switchboardv1alpha1.APIKey, timeout time.Duration) (*Issued, error) {
	if err := k.Check(ctx, key.Namespace, Needs(OpCreate, key.Spec.SecretName != "")); err != nil {
		return nil, err
	}
	if err := k.c.Create(ctx, key); err != nil {
		return nil, apiError(err, APIKeys.verb("create"), key.Namespace, key.Name)
	}
	issued, err := k.handOver(ctx, key, timeout, "issued the key", showable)
	if err != nil {
		return nil, k.abandon(ctx, key, err)
	}
	return issued, nil
}

// handOver waits until done says the wanted key is issued, then claims it (or, for a delivered
// key, only reports it). A lost claim is a *ClaimedError naming the key the other claimer holds.
func (k *Client) handOver(ctx context.Context, key *switchboardv1alpha1.APIKey, timeout time.Duration, what string,
	done func(*switchboardv1alpha1.APIKey, time.Time) (bool, error),
) (*Issued, error) {
	got, err := k.wait(ctx, client.ObjectKeyFromObject(key), timeout, what, done)
	if err != nil {
		return nil, err
	}
	return k.claimIssued(ctx, got)
}

// claimIssued claims the key got's status publishes, or reports a delivered key.
func (k *Client) claimIssued(ctx context.Context, got *switchboardv1alpha1.APIKey) (*Issued, error) {
	issued := &Issued{APIKey: got}
	if issued.Delivered() {
		return issued, nil
	}
	// The status names the reveal Secret of its current key generation only, and the wait
	// waited for the generation wanted, so what Claim returns is the key asked for.
	revealed, err := k.Claim(ctx, got)
	if errors.Is(err, ErrAlreadyClaimed) {
		return nil, &ClaimedError{Name: got.Name, Hint: got.Status.KeyHint}
	}
	if err != nil {
		return nil, err
	}
	issued.Revealed = revealed
	return issued, nil
}

// abandon deletes the APIKey Create made (the very object: UID precondition), so that nobody
// holds a key its creator never saw and the same name can be used again.
func (k *Client) abandon(ctx context.Context, key *switchboardv1alpha1.APIKey, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	uid := key.UID
	err := k.c.Delete(ctx, key, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return &AbandonedError{Namespace: key.Namespace, Name: key.Name, Cause: cause, DeleteErr: apiError(err, APIKeys.verb("delete"), key.Namespace, key.Name)}
}
