// Package keyindex is the API server's in-memory view of the cluster: which key hash belongs to
// which APIKey, what state each APIKey is in, and the listable Connections of every namespace in
// their documented order. It is fed by informer events (internal/server/indexfeed) and read by every
// request (internal/server/keycheck, internal/server/v1api), so lookups take a read lock and allocate nothing.
// How a Connection is served (its JSON, ETags) is internal/server/v1api's business: the index carries
// its encoding without reading it.
package keyindex

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// Result is the outcome of a key lookup. Only OK authenticates; the others say why not, for
// metrics and logs (clients see API_KEY_INVALID for all of them).
type Result int

// Lookup results.
const (
	OK Result = iota
	// Unknown: no hash Secret holds this hash.
	Unknown
	// Orphaned: a hash Secret holds it but its APIKey (same UID) is not in the cache.
	Orphaned
	// Revoked: spec.revoked is true, the APIKey is being deleted, or its hash Secret records
	// the operator's own revocation (spec.revokeWhenUnusedFor).
	Revoked
	// Expired: spec.expiresAt has passed.
	Expired
	// GraceEnded: the hash is the previous key of a rotation whose grace period has ended.
	GraceEnded
	// Duplicate: more than one hash Secret holds this hash. Which APIKey the key belongs to is
	// then unknowable, so it authenticates nobody until only one is left.
	Duplicate
	// LifetimeEnded: the current key's lifetime (APIKey spec.lifetime) has ended.
	LifetimeEnded
)

// String names the result for metrics and logs.
func (r Result) String() string {
	switch r {
	case OK:
		return "ok"
	case Unknown:
		return "unknown"
	case Orphaned:
		return "orphaned"
	case Revoked:
		return "revoked"
	case Expired:
		return "expired"
	case GraceEnded:
		return "grace_ended"
	case LifetimeEnded:
		return "lifetime_ended"
	case Duplicate:
		return "duplicate"
	}
	return "invalid"
}

// Key is the state of one APIKey as the server needs it. A Key is never modified once
// published: an update replaces it, so readers may keep the pointer without a lock.
type Key struct {
	Namespace string
	Name      string
	UID       types.UID
	// Revoked is spec.revoked, or true while the APIKey is being deleted.
	Revoked bool
	// ExpiresAt is spec.expiresAt; zero means never.
	ExpiresAt time.Time
	// Selector is spec.connectionSelector; nil means every Connection of the namespace.
	Selector labels.Selector
	// SelectorKey is Selector's canonical string ("" for nil): keys with equal selectors see
	// the same Connections, so readers may share what they derive under it (Snapshot.Memo).
	SelectorKey string
	// LastUsedAt is status.lastUsedAt as last seen in the cache. Tenants may write status, so
	// it serves only to skip redundant writes of the same field, never to decide access.
	LastUsedAt time.Time
	// PreviousKeyGeneration and PreviousKeyUsedAt are status.previousKeyUse as last seen in the
	// cache, for the same purpose as LastUsedAt.
	PreviousKeyGeneration int64
	PreviousKeyUsedAt     time.Time
	// RateLimit is spec.rateLimit and spec.credits, ready for the limiter; nil (neither) means
	// the request path does not consult the limiter at all.
	RateLimit *ratelimit.Policy
	// Costs are spec.credits.costs, compiled: what a request costs; nil, 1 credit each.
	Costs *permission.Costs
	// ChargeOnSuccess is spec.credits.charge OnSuccess: /v1 gives back the credits of a request
	// whose answer is not a success.
	ChargeOnSuccess bool
	// SourcesRestricted says spec.allowedSourceRanges is not empty: only SourceRanges may use
	// the key. It is kept apart from SourceRanges so that ranges that fail to parse restrict the
	// key to nothing rather than free it to anywhere.
	SourcesRestricted bool
	SourceRanges      []netip.Prefix
	// Audiences is spec.audiences: the audiences the key may be used for; empty means all.
	Audiences []string
	// Permissions are spec.permissions, compiled, then the rules of spec.permissionRoles (joined
	// by the index, roles.go); nil (none) means the key may do anything its audiences and
	// sources allow.
	Permissions *permission.Rules
	// ownPermissions are spec.permissions alone, and permissionRoles spec.permissionRoles: what
	// Permissions is joined from again when a role changes.
	ownPermissions  *permission.Rules
	permissionRoles []string
	// CreditPool is spec.creditPool: the APIKeyCreditPool of the key's namespace whose credits
	// RateLimit spends (joined by the index, pools.go); "" when none. CreditPoolMissing says
	// the key names one the index does not hold: it has no credits to spend.
	CreditPool        string
	CreditPoolMissing bool
	// ownRate is the policy of spec.rateLimit alone (nil: none), which a pool's credits join.
	ownRate *ratelimit.Policy

	usage *Usage
}

// Usage records when a key last authenticated a request. It outlives updates of its Key, so the
// request path can mark it with one atomic store and the batch writer can read it later.
type Usage struct {
	lastUsed    atomic.Int64 // unix nanoseconds of the last successful authentication
	lastWritten atomic.Int64 // unix nanoseconds of the lastUsedAt this server last wrote
	writtenAt   atomic.Int64 // unix nanoseconds of when it wrote it

	// The last use of the previous key generation during a rotation's grace: its generation and
	// time, read without the lock on the request path to skip the uses already recorded.
	prevGen, prevUsed atomic.Int64
	prevMu            sync.Mutex // orders the updates of prevGen and prevUsed together
	prevWrittenGen    int64      // under prevMu: what this server last wrote to status.previousKeyUse
	prevWritten       int64

	// binding is the record of a bound key's presenters (binding.go).
	binding bindingUse
}

// PreviousUse is one use of an old key generation.
type PreviousUse struct {
	// Generation is the old key's generation; 0 when there is no use.
	Generation int64
	// At is the use's time.
	At time.Time
}

// TouchPrevious records a use at now of the previous key, of generation gen, during its grace.
// As Touch, only a use at least a second later than the recorded one is stored; a use of an
// older generation than the recorded one (a request that raced a rotation) is not.
func (u *Usage) TouchPrevious(gen int64, now time.Time) {
	n := now.UnixNano()
	if u.prevGen.Load() == gen && n-u.prevUsed.Load() < int64(time.Second) {
		return
	}
	u.prevMu.Lock()
	defer u.prevMu.Unlock()
	switch cur := u.prevGen.Load(); {
	case gen < cur, gen == cur && n-u.prevUsed.Load() < int64(time.Second):
		return
	}
	u.prevGen.Store(gen)
	u.prevUsed.Store(n)
}

// PreviousUsed returns the last recorded use of a previous key; zero when there is none.
func (u *Usage) PreviousUsed() PreviousUse {
	u.prevMu.Lock()
	defer u.prevMu.Unlock()
	return PreviousUse{Generation: u.prevGen.Load(), At: unixNano(u.prevUsed.Load())}
}

// PreviousWritten returns the use of a previous key last written to status.previousKeyUse.
func (u *Usage) PreviousWritten() PreviousUse {
	u.prevMu.Lock()
	defer u.prevMu.Unlock()
	return PreviousUse{Generation: u.prevWrittenGen, At: unixNano(u.prevWritten)}
}

// MarkPreviousWritten records that p was written to status.previousKeyUse.
func (u *Usage) MarkPreviousWritten(p PreviousUse) {
	u.prevMu.Lock()
	defer u.prevMu.Unlock()
	u.prevWrittenGen, u.prevWritten = p.Generation, p.At.UnixNano()
}

// Touch records a use at now. Only a use at least a second later than the recorded one is
// stored, so that a busy key does not make every request write the same cache line.
func (u *Usage) Touch(now time.Time) {
	n := now.UnixNano()
	if n-u.lastUsed.Load() >= int64(time.Second) {
		u.lastUsed.Store(n)
	}
}

// Usage returns the key's usage record.
func (k *Key) Usage() *Usage { return k.usage }

// hashRef is what a hash points to.
type hashRef struct {
	uid    types.UID
	secret string // name of the hash Secret, so that only its own entries are removed
	// validUntil is the end of the grace period for a previous key, and the end of the current
	// key's lifetime (zero: it does not end on its own).
	validUntil time.Time
	previous   bool
	// generation is the previous key's generation (0: unknown); only previous refs have one.
	generation int64
	// revoked: the hash Secret records the operator's revocation of the key.
	revoked bool
	// binding is the binding the hash Secret records (nil: a bearer key), shared by its refs.
	binding *Binding
	// others are the refs of other hash Secrets that hold the same hash. While there are any,
	// the hash authenticates nobody (Duplicate); when they go, the remaining one counts again.
	others []hashRef
}

// Index is the in-memory index. The zero value is not usable: call New.
type Index struct {
	mu           sync.RWMutex
	hashes       map[apikey.Hash]hashRef
	secretHashes map[string][]apikey.Hash // hash Secret name → the hashes it contributed
	leaked       map[apikey.Hash]string   // a leaked key's hash → the hash Secret that records it
	secretLeaked map[string]apikey.Hash   // hash Secret name → the leaked hash it records
	duplicates   int                      // hashes held by more than one hash Secret
	keys         map[types.UID]*Key
	usage        map[types.UID]*Usage
	conns        map[string]*nsState      // namespace → its Connections
	roles        named[*permission.Rules] // the APIKeyRoles, compiled, and the keys naming each
	pools        named[*CreditPool]       // the APIKeyCreditPools, read, and the keys naming each
}

// New returns an empty index.
func New() *Index {
	return &Index{
		hashes:       map[apikey.Hash]hashRef{},
		secretHashes: map[string][]apikey.Hash{},
		leaked:       map[apikey.Hash]string{},
		secretLeaked: map[string]apikey.Hash{},
		keys:         map[types.UID]*Key{},
		usage:        map[types.UID]*Usage{},
		conns:        map[string]*nsState{},
		roles:        newNamed[*permission.Rules](),
		pools:        newNamed[*CreditPool](),
	}
}

// Lookup finds the APIKey whose current key, or previous key within its grace period, has hash
// h, and checks its state at now. It allocates nothing.
func (x *Index) Lookup(h *apikey.Hash, now time.Time) (*Key, Result) {
	key, res, _ := x.LookupGeneration(h, now)
	return key, res
}

// LookupGeneration is Lookup that also says, when h is the previous key of a rotation, that
// key's generation (0 for a current key), so that its use is recorded apart
// (Usage.TouchPrevious): spec.graceEndsWhenUnusedFor ends the grace from it.
func (x *Index) LookupGeneration(h *apikey.Hash, now time.Time) (key *Key, res Result, previousGeneration int64) {
	key, res, ref := x.lookup(h, now)
	if ref.previous {
		previousGeneration = max(ref.generation, 1)
	}
	return key, res, previousGeneration
}

func (x *Index) lookup(h *apikey.Hash, now time.Time) (*Key, Result, hashRef) {
	x.mu.RLock()
	ref, ok := x.hashes[*h]
	var key *Key
	if ok {
		key = x.keys[ref.uid]
	}
	x.mu.RUnlock()
	switch {
	case !ok:
		return nil, Unknown, ref
	case ref.others != nil:
		return nil, Duplicate, ref
	case key == nil:
		return nil, Orphaned, ref
	case key.Revoked || ref.revoked:
		return key, Revoked, ref
	case !key.ExpiresAt.IsZero() && !now.Before(key.ExpiresAt):
		return key, Expired, ref
	case ref.previous && !now.Before(ref.validUntil):
		return key, GraceEnded, ref
	case !ref.validUntil.IsZero() && !now.Before(ref.validUntil):
		return key, LifetimeEnded, ref
	}
	return key, OK, ref
}

// Keys returns every APIKey in the index, for the lastUsedAt writer.
func (x *Index) Keys() []*Key {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*Key, 0, len(x.keys))
	for _, k := range x.keys {
		out = append(out, k)
	}
	return out
}

// Stats counts what the index holds, for tests, logs and metrics.
type Stats struct {
	Hashes, Keys, Namespaces, Connections int
	// DuplicateHashes counts the hashes that more than one hash Secret holds (each refused).
	DuplicateHashes int
}

// Stats returns the current counts.
func (x *Index) Stats() Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := Stats{Hashes: len(x.hashes), Keys: len(x.keys), Namespaces: len(x.conns), DuplicateHashes: x.duplicates}
	for _, ns := range x.conns {
		s.Connections += len(ns.byName)
	}
	return s
}

// LastUsed returns the last recorded use, or zero.
func (u *Usage) LastUsed() time.Time { return unixNano(u.lastUsed.Load()) }

// LastWritten returns the use last written to status.lastUsedAt, or zero.
func (u *Usage) LastWritten() time.Time { return unixNano(u.lastWritten.Load()) }

// WrittenAt returns when the last write happened, or zero.
func (u *Usage) WrittenAt() time.Time { return unixNano(u.writtenAt.Load()) }

// MarkWritten records that the use at used was written at now.
func (u *Usage) MarkWritten(used, now time.Time) {
	u.lastWritten.Store(used.UnixNano())
	u.writtenAt.Store(now.UnixNano())
}

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
