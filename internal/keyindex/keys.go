package keyindex

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// SetHashSecret adds or replaces the hashes of one hash Secret. It returns an error, and keeps
// none of the Secret's hashes, when the Secret does not follow the contract: a half-understood
// hash Secret must not authenticate anything.
func (x *Index) SetHashSecret(s *corev1.Secret) error {
	refs, err := parseHashSecret(s)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeSecretLocked(s.Name)
	if err != nil {
		return err
	}
	hashes := make([]apikey.Hash, 0, len(refs))
	for h, ref := range refs {
		x.hashes[h] = ref
		hashes = append(hashes, h)
	}
	x.secretHashes[s.Name] = hashes
	return nil
}

// DeleteHashSecret removes the hashes of the named hash Secret.
func (x *Index) DeleteHashSecret(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeSecretLocked(name)
}

func (x *Index) removeSecretLocked(name string) {
	for _, h := range x.secretHashes[name] {
		if x.hashes[h].secret == name {
			delete(x.hashes, h)
		}
	}
	delete(x.secretHashes, name)
}

// parseHashSecret reads a hash Secret as internal/keysecret defines it.
func parseHashSecret(s *corev1.Secret) (map[apikey.Hash]hashRef, error) {
	h, err := keysecret.ParseHash(s)
	if err != nil {
		return nil, errorf("%v", err)
	}
	refs := map[apikey.Hash]hashRef{h.Current: {uid: h.UID, secret: s.Name}}
	if h.HasPrevious {
		refs[h.Previous] = hashRef{uid: h.UID, secret: s.Name, previous: true, validUntil: h.PreviousValidUntil}
	}
	return refs, nil
}

// SetAPIKey adds or replaces an APIKey. A selector that does not parse makes the key see
// nothing (and is reported), rather than everything.
func (x *Index) SetAPIKey(k *switchboardv1alpha1.APIKey) error {
	key := &Key{
		Namespace: k.Namespace,
		Name:      k.Name,
		UID:       k.UID,
		Revoked:   k.Spec.Revoked || k.DeletionTimestamp != nil,
		Hint:      k.Status.KeyHint,
	}
	if k.Spec.ExpiresAt != nil {
		key.ExpiresAt = k.Spec.ExpiresAt.Time
	}
	if k.Status.LastUsedAt != nil {
		key.LastUsedAt = k.Status.LastUsedAt.Time
	}
	var err error
	if sel := k.Spec.ConnectionSelector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
		key.Selector, err = metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			key.Selector = labels.Nothing()
			err = errorf("APIKey %s/%s: connectionSelector: %v", k.Namespace, k.Name, err)
		}
		key.SelectorKey = key.Selector.String()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	u := x.usage[k.UID]
	if u == nil {
		u = &Usage{}
		x.usage[k.UID] = u
	}
	key.usage = u
	x.keys[k.UID] = key
	return err
}

// DeleteAPIKey removes an APIKey.
func (x *Index) DeleteAPIKey(uid types.UID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.keys, uid)
	delete(x.usage, uid)
}
