package plugin

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// pollInterval is how often the plugin reads the APIKey while it waits for the operator. A
// poll (rather than a watch) needs only the "get" permission the command needs anyway.
const pollInterval = 200 * time.Millisecond

// waitForKey reads the APIKey until done reports true or an error, or until timeout passes.
// what describes the awaited state for the timeout message ("published the key").
func waitForKey(ctx context.Context, c client.Client, key types.NamespacedName, timeout time.Duration, what string,
	done func(*switchboardv1alpha1.APIKey) (bool, error),
) (*switchboardv1alpha1.APIKey, error) {
	var last *switchboardv1alpha1.APIKey
	var failed error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		var k switchboardv1alpha1.APIKey
		if err := c.Get(ctx, key, &k); err != nil {
			if ctx.Err() != nil {
				return false, nil //nolint:nilerr // the timeout (or an interrupt) struck during the read: say so below
			}
			failed = explain(err, action{verb: "get", resource: "apikeys.switchboard.dev", kind: "APIKey", namespace: key.Namespace, name: key.Name})
			return false, failed
		}
		last = &k
		ok, err := done(&k)
		failed = err
		return ok, err
	})
	switch {
	case err == nil:
		return last, nil
	case failed != nil:
		return nil, failed
	case wait.Interrupted(err) && ctx.Err() == nil:
		return nil, fmt.Errorf("%w after %s: the operator has not %s for APIKey %q in namespace %q (%s); the switchboard operator may not be running (check its pods, by default in namespace %q)",
			ErrTimeout, timeout, what, key.Name, key.Namespace, describeProgress(last), switchboardv1alpha1.DefaultSystemNamespace)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("interrupted while waiting for APIKey %q: %w", key.Name, context.Cause(ctx))
	}
	return nil, err
}

// describeProgress says how far the operator got, for the timeout message.
func describeProgress(k *switchboardv1alpha1.APIKey) string {
	if k == nil {
		return "the APIKey could not be read"
	}
	ready := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady)
	if ready == nil {
		return "no status yet"
	}
	return fmt.Sprintf("Ready=%s, reason %s", ready.Status, ready.Reason)
}

// refusal returns an error when the APIKey can no longer become usable: revoked, expired,
// being deleted, or its delivery Secret conflicts with one switchboard does not manage.
func refusal(k *switchboardv1alpha1.APIKey) error {
	if k.DeletionTimestamp != nil {
		return fmt.Errorf("APIKey %q is being deleted", k.Name)
	}
	if k.Spec.Revoked {
		return fmt.Errorf("APIKey %q is revoked; create a new APIKey instead", k.Name)
	}
	ready := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady)
	if ready == nil || ready.Status == "True" {
		return nil
	}
	switch ready.Reason {
	case switchboardv1alpha1.ReasonExpired:
		return fmt.Errorf("APIKey %q has expired; create a new APIKey instead", k.Name)
	case switchboardv1alpha1.ReasonDeliveryConflict:
		return fmt.Errorf("APIKey %q cannot deliver its key: %s", k.Name, ready.Message)
	}
	return nil
}

// keyShowable is the wait condition of the commands that show a key: true once it can be
// claimed or was delivered, an error once it never will be.
func keyShowable(k *switchboardv1alpha1.APIKey) (bool, error) {
	if err := refusal(k); err != nil {
		return false, err
	}
	switch currentReveal(k) {
	case revealClaimable, revealDelivered:
		return true, nil
	case revealGone:
		return false, errGone(k)
	}
	return false, nil
}

// claimPermissions are what claiming a one-time reveal takes; whose names the key in the
// message ("the key's", "the new key's").
func claimPermissions(whose string) []permission {
	return []permission{
		secretPermission("get", "read "+whose+" one-time reveal Secret"),
		secretPermission("delete", "claim "+whose+" one-time reveal Secret"),
	}
}

// revealState is what can be done about the current key's one-time reveal.
type revealState int

const (
	revealWaiting   revealState = iota // the operator has not published it yet
	revealClaimable                    // status.revealSecretName names it
	revealDelivered                    // the key is kept in spec.secretName
	revealGone                         // claimed by someone, or expired unclaimed
)

// currentReveal tells the state of the current key's reveal from the status.
func currentReveal(k *switchboardv1alpha1.APIKey) revealState {
	ready := meta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionReady)
	revealed := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed)
	switch {
	case !ready || k.Status.KeyGeneration == 0:
		return revealWaiting
	case k.Spec.SecretName != "":
		if revealed != nil && revealed.Reason == switchboardv1alpha1.ReasonDelivered {
			return revealDelivered
		}
		return revealWaiting
	case k.Status.RevealSecretName != "":
		return revealClaimable
	case revealed != nil && (revealed.Reason == switchboardv1alpha1.ReasonRevealClaimed || revealed.Reason == switchboardv1alpha1.ReasonRevealExpired):
		return revealGone
	}
	return revealWaiting
}

// errGone says why a key can no longer be revealed.
func errGone(k *switchboardv1alpha1.APIKey) error {
	revealed := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed)
	if revealed != nil && revealed.Reason == switchboardv1alpha1.ReasonRevealExpired {
		return fmt.Errorf("the key of APIKey %q was never claimed and its reveal expired; rotate the key to get a new one", k.Name)
	}
	return fmt.Errorf("APIKey %q: %w", k.Name, ErrAlreadyClaimed)
}
