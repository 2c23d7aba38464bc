package keyindex

import (
	corev1 "k8s.io/api/core/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// putHashSecret puts a hash Secret into the index through the door the server's cache uses:
// read once (the cache transform), then put (the event handler).
func putHashSecret(x *Index, s *corev1.Secret) error { return x.PutHashSecret(ReadHashSecret(s)) }

// putAPIKey puts an APIKey into the index through the door the server's cache uses: NewKey in
// the cache transform, PutKey in the event handler. The error is NewKey's.
func putAPIKey(x *Index, k *switchboardv1alpha1.APIKey) error {
	key, err := NewKey(k)
	x.PutKey(key)
	return err
}
