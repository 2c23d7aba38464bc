package keyclient

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Revoke revokes an APIKey for good: every request with its key, and with a previous key still
// in its grace period, is refused from then on. It returns the APIKey and whether it was
// revoked already (then nothing is checked or changed). Permissions are checked first; then
// confirm, when not nil, is asked (a prompt) and may abort with an error.
func (k *Client) Revoke(ctx context.Context, namespace, name string, confirm func(*switchboardv1alpha1.APIKey) error) (*switchboardv1alpha1.APIKey, bool, error) {
	key, err := k.Get(ctx, namespace, name)
	if err != nil {
		return nil, false, err
	}
	if key.Spec.Revoked {
		return key, true, nil
	}
	if err := k.Check(ctx, namespace, Needs(OpRevoke, false)); err != nil {
		return nil, false, err
	}
	if confirm != nil {
		if err := confirm(key); err != nil {
			return nil, false, err
		}
	}
	before := key.DeepCopy()
	key.Spec.Revoked = true
	if err := k.c.Patch(ctx, key, client.MergeFrom(before)); err != nil {
		return nil, false, apiError(err, APIKeys.verb("patch"), namespace, name)
	}
	return key, false, nil
}
