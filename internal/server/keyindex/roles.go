package keyindex

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
)

// An APIKey's permissions are its own rules, then the rules of the APIKeyRoles it names. The
// index keeps each role compiled (the feed compiles it once per change) and which keys name it,
// so that a role's change joins again only those keys' rules (permission.Join compiles
// nothing), and no request reads a role.

// roleRef names an APIKeyRole: a key names roles of its own namespace.
type roleRef struct{ namespace, name string }

// PutRole adds or replaces the APIKeyRole namespace/name, its rules compiled (nil: none;
// permission.CompileRole's refusal of everything when they do not compile), and publishes
// again every key that names it.
func (x *Index) PutRole(namespace, name string, rules *permission.Rules) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ref := roleRef{namespace, name}
	x.roles[ref] = rules
	x.republishLocked(ref)
}

// DeleteRole removes the APIKeyRole namespace/name: the keys that name it are allowed nothing
// until it is back.
func (x *Index) DeleteRole(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ref := roleRef{namespace, name}
	delete(x.roles, ref)
	x.republishLocked(ref)
}

// republishLocked publishes again, as a new Key, every key that names ref.
func (x *Index) republishLocked(ref roleRef) {
	for uid := range x.roleKeys[ref] {
		if k := x.keys[uid]; k != nil {
			x.keys[uid] = x.joinRolesLocked(k)
		}
	}
}

// withRolesLocked is key as published: key itself when it names no role, else a copy whose
// Permissions are joined with its roles', and which the index records as naming them.
func (x *Index) withRolesLocked(key *Key) *Key {
	if len(key.permissionRoles) == 0 {
		return key
	}
	for _, name := range key.permissionRoles {
		ref := roleRef{key.Namespace, name}
		if x.roleKeys[ref] == nil {
			x.roleKeys[ref] = map[types.UID]struct{}{}
		}
		x.roleKeys[ref][key.UID] = struct{}{}
	}
	return x.joinRolesLocked(key)
}

// joinRolesLocked is a copy of key whose Permissions are its own, then its roles'
// (permission.WithRoles).
func (x *Index) joinRolesLocked(key *Key) *Key {
	out := *key
	out.Permissions = permission.WithRoles(key.ownPermissions, key.permissionRoles, func(name string) (*permission.Rules, bool) {
		rules, ok := x.roles[roleRef{key.Namespace, name}]
		return rules, ok
	})
	return &out
}

// unlinkRolesLocked forgets that key (nil: none) names its roles.
func (x *Index) unlinkRolesLocked(key *Key) {
	if key == nil {
		return
	}
	for _, name := range key.permissionRoles {
		ref := roleRef{key.Namespace, name}
		delete(x.roleKeys[ref], key.UID)
		if len(x.roleKeys[ref]) == 0 {
			delete(x.roleKeys, ref)
		}
	}
}
