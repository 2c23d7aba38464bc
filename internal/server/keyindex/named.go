package keyindex

import "k8s.io/apimachinery/pkg/types"

// named is what the index keeps of a kind of object that keys name in their own namespace
// (APIKeyRoles, APIKeyCreditPools): each object as read (the feed reads it once per change),
// and which keys name it, so that a change of one publishes again the keys naming it alone, and
// no request reads one. The namespace is always the key's, never a tenant's choice.
type named[T any] struct {
	objects map[objectRef]T
	keys    map[objectRef]map[types.UID]struct{}
}

// objectRef names an object of a key's namespace.
type objectRef struct{ namespace, name string }

func newNamed[T any]() named[T] {
	return named[T]{objects: map[objectRef]T{}, keys: map[objectRef]map[types.UID]struct{}{}}
}

// get is the object namespace/name, if there is one.
func (n *named[T]) get(namespace, name string) (T, bool) {
	obj, ok := n.objects[objectRef{namespace, name}]
	return obj, ok
}

// set adds or replaces the object namespace/name, or removes it when !present, and returns the
// keys that name it, to be published again.
func (n *named[T]) set(namespace, name string, obj T, present bool) map[types.UID]struct{} {
	ref := objectRef{namespace, name}
	if present {
		n.objects[ref] = obj
	} else {
		delete(n.objects, ref)
	}
	return n.keys[ref]
}

// link records that the key uid of namespace names the objects names.
func (n *named[T]) link(namespace string, uid types.UID, names ...string) {
	for _, name := range names {
		ref := objectRef{namespace, name}
		if n.keys[ref] == nil {
			n.keys[ref] = map[types.UID]struct{}{}
		}
		n.keys[ref][uid] = struct{}{}
	}
}

// unlink forgets that the key uid of namespace names the objects names.
func (n *named[T]) unlink(namespace string, uid types.UID, names ...string) {
	for _, name := range names {
		ref := objectRef{namespace, name}
		delete(n.keys[ref], uid)
		if len(n.keys[ref]) == 0 {
			delete(n.keys, ref)
		}
	}
}

// republishLocked publishes again, as rebuild makes them, the keys uids.
func (x *Index) republishLocked(uids map[types.UID]struct{}, rebuild func(*Key) *Key) {
	for uid := range uids {
		if k := x.keys[uid]; k != nil {
			x.keys[uid] = rebuild(k)
		}
	}
}
