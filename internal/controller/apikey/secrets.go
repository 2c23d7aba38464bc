package apikey

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// conflictError says a Secret switchboard needs to write belongs to someone else.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

// timePtr is t as the API stores it: UTC, whole seconds.
func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

// getSecret reads a Secret from the cache and, when the cache does not have it, from the API
// server: a Secret created a moment ago may not be cached yet, and "gone" must be sure.
func (r *Reconciler) getSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, secret)
	}
	if err != nil {
		return nil, err
	}
	return secret, nil
}
