package keyindex

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// HashSecret is what the index takes from one hash Secret: its name and its hashes (the current
// key's, and the previous key's during a rotation's grace), or why it takes none.
type HashSecret struct {
	name    string
	entries []hashEntry // one or two
	// leaked is the hash of the APIKey's last key reported leaked (zero: none), which
	// authenticates nothing (Index.Leaked).
	leaked apikey.Hash
	err    error
}

type hashEntry struct {
	hash apikey.Hash
	ref  hashRef
}

// Name is the hash Secret's name.
func (h *HashSecret) Name() string { return h.name }

// Err says why the index takes none of the Secret's hashes; nil when it follows the contract.
func (h *HashSecret) Err() error { return h.err }

// ReadHashSecret reads a hash Secret as internal/keysecret defines it, without the index: a
// cache transform reads it once per watch event, so that the cache keeps this instead of the
// Secret.
func ReadHashSecret(s *corev1.Secret) *HashSecret {
	h, err := keysecret.ParseHash(s)
	if err != nil {
		return &HashSecret{name: s.Name, err: errorf("%v", err)}
	}
	binding := compileBinding(h.Binding)
	out := &HashSecret{name: s.Name, leaked: h.Leaked, entries: []hashEntry{{hash: h.Current, ref: hashRef{uid: h.UID, secret: s.Name, validUntil: h.NotAfter,
		revoked: h.Revoked || h.CurrentLeaked, binding: binding}}}}
	if h.HasPrevious { // never the current hash: ParseHash says so
		// Generations go up by one per issue (internal/controller/apikey), so the previous
		// key is the one before the current; a hash Secret without a generation has none to say.
		out.entries = append(out.entries, hashEntry{hash: h.Previous, ref: hashRef{uid: h.UID, secret: s.Name, previous: true,
			validUntil: h.PreviousValidUntil, revoked: h.Revoked, generation: max(h.Generation-1, 0), binding: binding}})
	}
	return out
}

// PutHashSecret adds or replaces the hashes of the hash Secret h was read from (ReadHashSecret).
// It returns an error, and keeps none of the Secret's hashes, when the Secret does not follow
// the contract: a half-understood hash Secret must not authenticate anything. When another hash
// Secret already holds one of its hashes, that hash authenticates nobody while both hold it, and
// the error is a *DuplicateError.
func (x *Index) PutHashSecret(h *HashSecret) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeSecretLocked(h.name)
	if h.err != nil {
		return h.err
	}
	hashes := make([]apikey.Hash, 0, len(h.entries))
	var dup *DuplicateError
	for _, e := range h.entries {
		hashes = append(hashes, e.hash)
		existing, ok := x.hashes[e.hash]
		if !ok {
			x.hashes[e.hash] = e.ref
			continue
		}
		if existing.others == nil {
			x.duplicates++
		}
		existing.others = append(existing.others, e.ref)
		x.hashes[e.hash] = existing
		if dup == nil {
			dup = &DuplicateError{Secret: h.name}
		}
		dup.Others = append(dup.Others, existing.secret)
	}
	x.secretHashes[h.name] = hashes
	if h.leaked != (apikey.Hash{}) {
		x.leaked[h.leaked] = h.name
		x.secretLeaked[h.name] = h.leaked
	}
	if dup != nil {
		return dup
	}
	return nil
}

// DuplicateError says that a hash Secret holds a hash other hash Secrets hold too. Only a bug or
// someone writing the system namespace by hand can cause it; the index then fails closed.
type DuplicateError struct {
	// Secret is the hash Secret just added; Others hold the same hash (one name per shared hash).
	Secret string
	Others []string
}

func (e *DuplicateError) Error() string {
	return errorf("hash Secret %s holds a hash that %v also hold%s; it authenticates nobody until only one does",
		e.Secret, e.Others, map[bool]string{true: "s", false: ""}[len(e.Others) == 1]).Error()
}

// DeleteHashSecret removes the hashes of the named hash Secret.
func (x *Index) DeleteHashSecret(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeSecretLocked(name)
}

// removeSecretLocked removes what the named hash Secret contributed. A hash it shared with
// others stays with them, and authenticates again once a single Secret holds it.
func (x *Index) removeSecretLocked(name string) {
	for _, h := range x.secretHashes[name] {
		ref, ok := x.hashes[h]
		if !ok {
			continue
		}
		// The refs of every Secret holding h but this one.
		var rest []hashRef
		if ref.secret != name {
			own := ref
			own.others = nil
			rest = append(rest, own)
		}
		for _, o := range ref.others {
			if o.secret != name {
				rest = append(rest, o)
			}
		}
		switch {
		case len(rest) == 0:
			delete(x.hashes, h)
		default:
			next := rest[0]
			if len(rest) > 1 {
				next.others = rest[1:]
			}
			x.hashes[h] = next
		}
		if ref.others != nil && len(rest) <= 1 {
			x.duplicates--
		}
	}
	delete(x.secretHashes, name)
	if l, ok := x.secretLeaked[name]; ok {
		if x.leaked[l] == name {
			delete(x.leaked, l)
		}
		delete(x.secretLeaked, name)
	}
}

// Leaked reports whether a hash Secret records h as its APIKey's last key reported leaked:
// the operator acted on a LeakReport of it, which switchboard alone writes. Such a key
// authenticates nothing (Lookup finds it Unknown, Revoked or past its overlap); this only
// tells the leak receiver that a report of it is already recorded.
func (x *Index) Leaked(h *apikey.Hash) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.leaked[*h]
	return ok
}

// NewKey reads what the index needs of an APIKey, without the index: a cache transform builds
// it once per watch event, so that the cache keeps it instead of the APIKey. The Key is
// complete even when it returns an error, which says what part of the spec the Key enforces
// as the strictest reading.
func NewKey(k *switchboardv1alpha1.APIKey) (*Key, error) {
	key := &Key{
		Namespace: k.Namespace,
		Name:      k.Name,
		UID:       k.UID,
		Revoked:   k.Spec.Revoked || k.DeletionTimestamp != nil,
	}
	if k.Spec.ExpiresAt != nil {
		key.ExpiresAt = k.Spec.ExpiresAt.Time
	}
	if k.Status.LastUsedAt != nil {
		key.LastUsedAt = k.Status.LastUsedAt.Time
	}
	if p := k.Status.PreviousKeyUse; p != nil {
		key.PreviousKeyGeneration, key.PreviousKeyUsedAt = p.KeyGeneration, p.LastUsedAt.Time
	}
	var err error
	if sel := k.Spec.ConnectionSelector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
		key.Selector, err = metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			key.Selector, key.SelectorKey = labels.Nothing(), selectorKeyNothing
			err = errorf("APIKey %s/%s: connectionSelector: %v", k.Namespace, k.Name, err)
		} else {
			key.SelectorKey = key.Selector.String()
		}
	}
	return key, errors.Join(err, setPolicy(key, k))
}

// PutKey adds or replaces the APIKey key was built from (NewKey). A selector that does not
// parse makes the key see nothing, rather than everything; so do source ranges (policy.go).
// key must not be changed after.
func (x *Index) PutKey(key *Key) {
	x.mu.Lock()
	defer x.mu.Unlock()
	u := x.usage[key.UID]
	if u == nil {
		u = &Usage{}
		x.usage[key.UID] = u
	}
	// The informer hands the same object over again at a resync, when readers may hold key:
	// write only what changes.
	if key.usage != u {
		key.usage = u
	}
	x.unlinkRolesLocked(x.keys[key.UID])
	x.unlinkPoolLocked(x.keys[key.UID])
	x.keys[key.UID] = x.withPoolLocked(x.withRolesLocked(key))
}

// selectorKeyNothing is the SelectorKey of a selector that matches nothing. labels.Nothing()
// prints as "", the key of "no selector": sharing it would list everything.
const selectorKeyNothing = "\x00nothing"

// DeleteAPIKey removes an APIKey.
func (x *Index) DeleteAPIKey(uid types.UID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unlinkRolesLocked(x.keys[uid])
	x.unlinkPoolLocked(x.keys[uid])
	delete(x.keys, uid)
	delete(x.usage, uid)
}
