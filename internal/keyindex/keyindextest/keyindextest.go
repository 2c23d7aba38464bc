// Package keyindextest puts objects into a keyindex.Index for tests of other packages, through
// the one door the server's cache uses: read once (the cache transform), then put (the event
// handler).
package keyindextest

import (
	corev1 "k8s.io/api/core/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
)

// PutHashSecret puts hash Secret s into x; the error is PutHashSecret's.
func PutHashSecret(x *keyindex.Index, s *corev1.Secret) error {
	return x.PutHashSecret(keyindex.ReadHashSecret(s))
}

// PutAPIKey puts APIKey k into x; the error is NewKey's.
func PutAPIKey(x *keyindex.Index, k *switchboardv1alpha1.APIKey) error {
	key, err := keyindex.NewKey(k)
	x.PutKey(key)
	return err
}
