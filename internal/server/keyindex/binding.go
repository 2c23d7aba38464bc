package keyindex

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// A key bound to workloads (APIKey spec.binding) is enforced from the record the operator wrote
// in its hash Secret (keysecret.DataBinding), never from the APIKey, which its tenant writes:
// the binding travels with the hashes it was read with (hashRef), compiled once per watch event
// by ReadHashSecret, so that a lookup hands it over with the key at no cost, and a key without
// one costs nothing more than a nil pointer.

// Binding is a key's binding compiled for the request path: sets to look the presenter up in.
// It is never modified once built.
type Binding struct {
	// Enforce is mode Enforce: a request that proves no bound workload is refused; otherwise
	// (ReportOnly) it is admitted and counted.
	Enforce bool
	// ServiceAccounts are the names of the ServiceAccounts of the key's namespace whose pods'
	// tokens prove the presenter.
	ServiceAccounts map[string]struct{}
	// SPIFFEIDs are the SPIFFE IDs a gateway's peer principal, or a token's workload in the
	// SPIFFE shape, proves the presenter by.
	SPIFFEIDs map[string]struct{}
	// PublicKeys are the JWK thumbprints whose DPoP-shaped proofs prove the presenter.
	PublicKeys []string
}

// compileBinding is b ready for the request path; nil for nil (a bearer key).
func compileBinding(b *keysecret.Binding) *Binding {
	if b == nil {
		return nil
	}
	out := &Binding{Enforce: b.Mode == switchboardv1alpha1.BindingEnforce, PublicKeys: b.PublicKeys}
	if len(b.ServiceAccounts) > 0 {
		out.ServiceAccounts = make(map[string]struct{}, len(b.ServiceAccounts))
		for _, s := range b.ServiceAccounts {
			out.ServiceAccounts[s] = struct{}{}
		}
	}
	if len(b.SPIFFEIDs) > 0 {
		out.SPIFFEIDs = make(map[string]struct{}, len(b.SPIFFEIDs))
		for _, s := range b.SPIFFEIDs {
			out.SPIFFEIDs[s] = struct{}{}
		}
	}
	return out
}

// AllowsServiceAccount says the ServiceAccount name of the key's namespace is bound.
func (b *Binding) AllowsServiceAccount(name string) bool {
	_, ok := b.ServiceAccounts[name]
	return ok
}

// AllowsSPIFFEID says the SPIFFE ID id is bound.
func (b *Binding) AllowsSPIFFEID(id string) bool {
	_, ok := b.SPIFFEIDs[id]
	return ok
}

// LookupBound is LookupGeneration that also hands over the binding recorded with the hash (nil:
// a bearer key). It allocates nothing.
func (x *Index) LookupBound(h *apikey.Hash, now time.Time) (key *Key, res Result, previousGeneration int64, binding *Binding) {
	key, res, ref := x.lookup(h, now)
	if ref.previous {
		previousGeneration = max(ref.generation, 1)
	}
	return key, res, previousGeneration, ref.binding
}

// PrincipalKind says how a presenter proved who it is.
type PrincipalKind uint8

// The kinds of principal, as status.binding.presenters[].principal spells them.
const (
	// PrincipalNone: nothing was proven (principal "").
	PrincipalNone PrincipalKind = iota
	// PrincipalServiceAccount: a ServiceAccount token (system:serviceaccount:NS:NAME).
	PrincipalServiceAccount
	// PrincipalPeer: a gateway's authenticated peer (its SPIFFE ID).
	PrincipalPeer
	// PrincipalPublicKey: a DPoP-shaped proof (jwk:THUMBPRINT).
	PrincipalPublicKey
)

// Presenter is who presented a bound key, in parts: the request path records it without
// building its principal's text (which would allocate); Principal builds it for the status.
type Presenter struct {
	Kind PrincipalKind
	// A and B are the principal's parts: the namespace and the ServiceAccount of a token, the
	// SPIFFE ID of a peer, the thumbprint of a public key.
	A, B string
	// Address is the client's address (invalid: unknown).
	Address netip.Addr
	// Bound says the binding allows this presenter.
	Bound bool
}

// Principal is p's principal as status.binding spells it, cut to the length the CRD allows
// (a ServiceAccount's name may be 253 characters, a gateway's peer principal anything): a
// principal too long must not fail the status patch that carries lastUsedAt too.
func (p *Presenter) Principal() string {
	var s string
	switch p.Kind {
	case PrincipalServiceAccount:
		s = "system:serviceaccount:" + p.A + ":" + p.B
	case PrincipalPeer:
		s = p.A
	case PrincipalPublicKey:
		s = "jwk:" + p.A
	}
	return s[:min(len(s), switchboardv1alpha1.MaxBindingPrincipalLength)]
}

// PresenterUse is one presenter's record: who, how many requests, the last one's time.
type PresenterUse struct {
	Presenter
	Requests int64
	LastSeen time.Time
}

// BindingUse is what this replica saw of the presenters of one bound key since it started: the
// most recent MaxBindingPresenters presenters (by principal and address), and the requests that
// proved no bound workload. Made at the key's first bound request; its memory is fixed after.
type BindingUse struct {
	mu         sync.Mutex
	presenters [switchboardv1alpha1.MaxBindingPresenters]PresenterUse
	n          int
	misuses    int64
	lastMisuse time.Time
	// changes counts the records, and written the count last written to status.binding.
	changes, written uint64
}

// Record records one request of p at now. It allocates nothing: a new presenter past the
// bound takes the place of the least recent.
func (b *BindingUse) Record(p *Presenter, now time.Time) {
	// A gateway's principal may be as long as its request: what is kept is bounded (slicing a
	// string allocates nothing).
	q := *p
	q.A, q.B = q.A[:min(len(q.A), switchboardv1alpha1.MaxBindingPrincipalLength)], q.B[:min(len(q.B), switchboardv1alpha1.MaxBindingPrincipalLength)]
	p = &q
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes++
	if !p.Bound {
		b.misuses++
		b.lastMisuse = now
	}
	oldest := 0
	for i := range b.n {
		e := &b.presenters[i]
		if e.Kind == p.Kind && e.A == p.A && e.B == p.B && e.Address == p.Address {
			e.Requests++
			e.LastSeen, e.Bound = now, p.Bound
			return
		}
		if e.LastSeen.Before(b.presenters[oldest].LastSeen) {
			oldest = i
		}
	}
	i := b.n
	if b.n < len(b.presenters) {
		b.n++
	} else {
		i = oldest
	}
	b.presenters[i] = PresenterUse{Presenter: *p, Requests: 1, LastSeen: now}
}

// BindingSnapshot is a BindingUse as read for a write of status.binding.
type BindingSnapshot struct {
	Presenters []PresenterUse
	Misuses    int64
	LastMisuse time.Time
	changes    uint64
}

// Snapshot reads b.
func (b *BindingUse) Snapshot() BindingSnapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BindingSnapshot{Presenters: append([]PresenterUse(nil), b.presenters[:b.n]...), Misuses: b.misuses, LastMisuse: b.lastMisuse, changes: b.changes}
}

// Unwritten says something was recorded since the last MarkWritten.
func (b *BindingUse) Unwritten() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changes != b.written
}

// MarkWritten records that s was written to status.binding.
func (b *BindingUse) MarkWritten(s *BindingSnapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.written = max(b.written, s.changes)
}

// bindingUse is the Usage's record of presenters; nil until the key's first bound request.
type bindingUse struct{ p atomic.Pointer[BindingUse] }

// Binding returns the key's record of presenters, made at the first call: only bound keys ask.
func (u *Usage) Binding() *BindingUse {
	if b := u.binding.p.Load(); b != nil {
		return b
	}
	u.binding.p.CompareAndSwap(nil, &BindingUse{})
	return u.binding.p.Load()
}

// BindingSeen returns the key's record of presenters; nil when no bound request was seen.
func (u *Usage) BindingSeen() *BindingUse { return u.binding.p.Load() }
