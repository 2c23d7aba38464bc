package keyclient

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Reveal hands over the current key of an existing APIKey (one made with kubectl apply or
// GitOps, or whose rotation timed out): it waits up to timeout for the operator to publish the
// key, then claims it. A delivered key is only reported. When somebody else claimed it first
// it fails with a *ClaimedError and changes nothing: the key was not issued for the caller,
// so it is not theirs to stop (rotate it to get a new one).
func (k *Client) Reveal(ctx context.Context, namespace, name string, timeout time.Duration) (*Issued, error) {
	if err := k.Check(ctx, namespace, Needs(OpReveal, false)); err != nil {
		return nil, err
	}
	return k.handOver(ctx, &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		timeout, "published the key", showable)
}
