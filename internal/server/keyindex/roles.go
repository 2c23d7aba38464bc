package keyindex

import "github.com/switchboard-dev/switchboard/internal/apikey/permission"

// An APIKey's permissions are its own rules, then the rules of the APIKeyRoles it names. The
// index keeps each role compiled (the feed compiles it once per change) and which keys name it,
// so that a role's change joins again only those keys' rules (permission.Join compiles
// nothing), and no request reads a role (named.go).

// PutRole adds or replaces the APIKeyRole namespace/name, its rules compiled (nil: none;
// permission.CompileRole's refusal of everything when they do not compile), and publishes
// again every key that names it.
func (x *Index) PutRole(namespace, name string, rules *permission.Rules) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.republishLocked(x.roles.set(namespace, name, rules, true), x.joinRolesLocked)
}

// DeleteRole removes the APIKeyRole namespace/name: the keys that name it are allowed nothing
// until it is back.
func (x *Index) DeleteRole(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.republishLocked(x.roles.set(namespace, name, nil, false), x.joinRolesLocked)
}

// withRolesLocked is key as published: key itself when it names no role, else a copy whose
// Permissions are joined with its roles', and which the index records as naming them.
func (x *Index) withRolesLocked(key *Key) *Key {
	if len(key.permissionRoles) == 0 {
		return key
	}
	x.roles.link(key.Namespace, key.UID, key.permissionRoles...)
	return x.joinRolesLocked(key)
}

// joinRolesLocked is a copy of key whose Permissions are its own, then its roles'
// (permission.WithRoles).
func (x *Index) joinRolesLocked(key *Key) *Key {
	out := *key
	out.Permissions = permission.WithRoles(key.ownPermissions, key.permissionRoles, func(name string) (*permission.Rules, bool) {
		return x.roles.get(key.Namespace, name)
	})
	return &out
}

// unlinkRolesLocked forgets that key (nil: none) names its roles.
func (x *Index) unlinkRolesLocked(key *Key) {
	if key != nil {
		x.roles.unlink(key.Namespace, key.UID, key.permissionRoles...)
	}
}
