// Package keyindextest puts objects into a keyindex.Index for tests of other packages, through
// the one door the server's cache uses: read once (the cache transform), then put (the event
// handler).
package keyindextest

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
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

// PutKey puts APIKey k into x with key as its current key: k, and a hash Secret of key that
// names k's UID, as the operator writes one. The error joins PutAPIKey's and PutHashSecret's.
func PutKey(x *keyindex.Index, k *switchboardv1alpha1.APIKey, key string) error {
	return errors.Join(PutAPIKey(x, k), PutHashSecret(x, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: keysecret.HashName(k.UID), Labels: map[string]string{keysecret.LabelAPIKeyUID: string(k.UID)}},
		Type:       keysecret.TypeHash,
		Data:       map[string][]byte{keysecret.DataHash: []byte(apikey.Sum(key).String())},
	}))
}

// PutBoundKey is PutKey with the binding record b in the hash Secret, as the operator writes
// it for a key with spec.binding.
func PutBoundKey(x *keyindex.Index, k *switchboardv1alpha1.APIKey, key string, b keysecret.Binding) error {
	return errors.Join(PutAPIKey(x, k), PutHashSecret(x, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: keysecret.HashName(k.UID), Labels: map[string]string{keysecret.LabelAPIKeyUID: string(k.UID)}},
		Type:       keysecret.TypeHash,
		Data:       map[string][]byte{keysecret.DataHash: []byte(apikey.Sum(key).String()), keysecret.DataBinding: b.Encode()},
	}))
}
