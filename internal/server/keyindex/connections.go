package keyindex

import (
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
)

// Conn is one listable Connection: its sort key, its labels for selectors, and the form in which
// its reader serves it. The index orders and selects Conns; it never reads Encoded.
type Conn struct {
	ID     string
	Name   string
	Labels labels.Set
	// Encoded is the Connection as the reader serves it (the server: its /v1 JSON), made once
	// when the Connection changed.
	Encoded []byte
}

// Less orders Connections by id, then by name: the documented order of GET /v1/connections.
func (c *Conn) Less(id, name string) bool {
	if c.ID != id {
		return c.ID < id
	}
	return c.Name < name
}

// Snapshot is the immutable list of a namespace's listable Connections, in order. A change to
// the namespace makes a new Snapshot, so whatever a reader derives from one stays valid for as
// long as it holds it (see Memo).
type Snapshot struct {
	items []*Conn
	// served is set once a reader has had this snapshot: from then on a change copies it (see
	// SetConnection).
	served atomic.Bool

	// all memoizes under the empty key, the one nearly every request asks for, without a map.
	all   memo
	memo  sync.Map     // key → *memo
	memos atomic.Int32 // entries in memo, at most MaxMemos

	// inFlight is the namespace's, shared by all its snapshots (nil for a namespace without
	// Connections): see InFlight.
	inFlight *atomic.Int64
}

// MaxMemos bounds the keys a Snapshot memoizes besides the empty one. The server memoizes what
// it derives per distinct selector, and a tenant chooses its keys' selectors: without a bound,
// K keys with distinct selectors would hold K values. Past the bound a value is built for each
// caller and not kept (build is told so), so a namespace with that many selectors pays in its
// own requests' work, not in everyone's memory. The count bounds entries, not bytes: what a
// value may weigh is the builder's business (the server keeps item lists, and bodies only
// within a byte budget).
const MaxMemos = 64

// memo is a value built on first use.
type memo struct {
	once  sync.Once
	built atomic.Bool // value is set
	value any
}

// Items returns the Connections in order. The slice must not be modified.
func (s *Snapshot) Items() []*Conn { return s.items }

// Memo returns the value build makes from snapshot s's items for key, built on first use and
// then shared by every caller that passes the same key to this snapshot. The server keeps its
// ready lists here, one per distinct selector: they live exactly as long as the Connections
// they were made from. Past MaxMemos keys, build runs for every call with kept false: a value
// made for one caller only should cost that caller little. build must not modify items. A key
// must always be asked for with the same T.
func Memo[T any](s *Snapshot, key string, build func(items []*Conn, kept bool) T) T {
	if key == "" {
		if v, ok := s.all.get().(T); ok {
			return v // built: no closure for the once
		}
	}
	return s.memoize(key, func(items []*Conn, kept bool) any { return build(items, kept) }).(T)
}

// get is the value of a memo built already (nil otherwise).
func (m *memo) get() any {
	if m.built.Load() {
		return m.value
	}
	return nil
}

// memoize is Memo without the type.
func (s *Snapshot) memoize(key string, build func(items []*Conn, kept bool) any) any {
	m := &s.all
	if key != "" {
		v, ok := s.memo.Load(key)
		if !ok {
			// Count before storing, so that racing callers never store more than MaxMemos.
			if s.memos.Add(1) > MaxMemos {
				s.memos.Add(-1)
				return build(s.items, false)
			}
			var loaded bool
			if v, loaded = s.memo.LoadOrStore(key, &memo{}); loaded {
				s.memos.Add(-1)
			}
		}
		m = v.(*memo)
	}
	m.once.Do(func() {
		m.value = build(s.items, true)
		m.built.Store(true)
	})
	return m.value
}

// InFlight is a counter the reader keeps for the namespace as a whole, whichever snapshot it
// holds: the server counts there the bytes of the namespace's responses being written, to bound
// what slow readers of one tenant hold. It is nil for a namespace without Connections. A
// namespace whose last Connection goes and comes back starts a new counter; readers of the old
// one still release what they took from it.
func (s *Snapshot) InFlight() *atomic.Int64 { return s.inFlight }

var emptySnapshot = &Snapshot{}

// nsState is a namespace's Connections. Its snapshot is derived from byName when first read:
// nil means stale. A change to a snapshot no reader has had just marks it stale, so a burst of
// changes between reads (above all the informer's initial list, when nothing reads: the server
// is not ready) costs one sort at the next read, not a copy of the namespace per change.
type nsState struct {
	byName   map[string]*Conn
	snap     atomic.Pointer[Snapshot]
	build    sync.Mutex // one reader builds a stale snapshot; the others wait for it
	inFlight atomic.Int64
}

// Connections returns the listable Connections of namespace ns.
func (x *Index) Connections(ns string) *Snapshot {
	x.mu.RLock()
	defer x.mu.RUnlock()
	st := x.conns[ns]
	if st == nil {
		return emptySnapshot
	}
	if s := st.snap.Load(); s != nil {
		return served(s)
	}
	// Writers are kept out by the read lock, so byName holds still while the snapshot is built.
	st.build.Lock()
	defer st.build.Unlock()
	if s := st.snap.Load(); s != nil {
		return served(s)
	}
	items := make([]*Conn, 0, len(st.byName))
	for _, c := range st.byName {
		items = append(items, c)
	}
	slices.SortFunc(items, func(a, b *Conn) int {
		if a.Less(b.ID, b.Name) {
			return -1
		}
		if b.Less(a.ID, a.Name) {
			return 1
		}
		return 0
	})
	s := &Snapshot{items: items, inFlight: &st.inFlight}
	s.served.Store(true)
	st.snap.Store(s)
	return s
}

// served marks s as had by a reader; after the first time, only a load.
func served(s *Snapshot) *Snapshot {
	if !s.served.Load() {
		s.served.Store(true)
	}
	return s
}

// SetConnection adds or replaces the Connection c.Name of namespace. c must not be modified
// afterwards: snapshots share it.
func (x *Index) SetConnection(namespace string, c *Conn) {
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.conns[namespace]
	if st == nil {
		st = &nsState{byName: map[string]*Conn{}}
		x.conns[namespace] = st
	}
	old := st.byName[c.Name]
	st.byName[c.Name] = c
	s := st.snap.Load()
	if s == nil || !s.served.Load() {
		st.snap.Store(nil) // stale: rebuilt at the next read
		return
	}
	// Readers hold s: derive the next snapshot from it, in one copy.
	items := s.items
	if old != nil {
		items = remove(items, old)
	}
	st.snap.Store(&Snapshot{items: insert(items, c), inFlight: &st.inFlight})
}

// DeleteConnection removes a Connection.
func (x *Index) DeleteConnection(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.conns[namespace]
	if st == nil || st.byName[name] == nil {
		return
	}
	old := st.byName[name]
	delete(st.byName, name)
	if len(st.byName) == 0 {
		delete(x.conns, namespace)
		return
	}
	s := st.snap.Load()
	if s == nil || !s.served.Load() {
		st.snap.Store(nil)
		return
	}
	st.snap.Store(&Snapshot{items: remove(s.items, old), inFlight: &st.inFlight})
}

// search returns where (id, name) is or would be in items.
func search(items []*Conn, id, name string) int {
	i, _ := slices.BinarySearchFunc(items, (*Conn)(nil), func(c *Conn, _ *Conn) int {
		if c.Less(id, name) {
			return -1
		}
		if c.ID == id && c.Name == name {
			return 0
		}
		return 1
	})
	return i
}

// After returns the index of the first item that sorts after (id, name).
func After(items []*Conn, id, name string) int {
	i := search(items, id, name)
	if i < len(items) && items[i].ID == id && items[i].Name == name {
		i++
	}
	return i
}

// insert returns a new slice with c in order; items is not modified (snapshots share it).
func insert(items []*Conn, c *Conn) []*Conn {
	i := search(items, c.ID, c.Name)
	out := make([]*Conn, 0, len(items)+1)
	out = append(out, items[:i]...)
	out = append(out, c)
	return append(out, items[i:]...)
}

// remove returns a new slice without c; items is not modified.
func remove(items []*Conn, c *Conn) []*Conn {
	i := search(items, c.ID, c.Name)
	if i >= len(items) || items[i] != c {
		// Not where its key says: fall back to a scan rather than lose the removal.
		i = slices.Index(items, c)
		if i < 0 {
			return items
		}
	}
	out := make([]*Conn, 0, len(items)-1)
	out = append(out, items[:i]...)
	return append(out, items[i+1:]...)
}
