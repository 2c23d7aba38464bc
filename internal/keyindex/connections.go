package keyindex

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"k8s.io/apimachinery/pkg/labels"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Conn is one listable Connection: its sort key, its labels for selectors, and its JSON.
type Conn struct {
	ID     string
	Name   string
	Labels labels.Set
	// JSON is the Connection as the /v1 API returns it, encoded once when the Connection changed.
	JSON []byte
}

// Less orders Connections by id, then by name: the documented order of GET /v1/connections.
func (c *Conn) Less(id, name string) bool {
	if c.ID != id {
		return c.ID < id
	}
	return c.Name < name
}

// Snapshot is the immutable list of a namespace's listable Connections, in order.
type Snapshot struct {
	items []*Conn

	whole lazyList
	// bySelector caches the list response per distinct selector of the namespace's keys
	// (Key.SelectorKey → *lazyList), so keys with a selector also get a ready one.
	bySelector sync.Map
}

// List is a ready list response: built once per snapshot and selector, then shared by every
// request that wants it.
type List struct {
	// Body is the JSON response.
	Body []byte
	// ETag is the body's quoted entity tag.
	ETag string
	// ETagHeader and LengthHeader are the ETag and Content-Length header values as
	// one-element slices, so that a response's header map takes them without allocating.
	// They must not be modified.
	ETagHeader, LengthHeader []string
}

// NewList wraps body as a List; extra goes into the ETag with the body (a page's next cursor).
func NewList(body []byte, extra string) *List {
	etag := ETag(body, extra)
	return &List{Body: body, ETag: etag, ETagHeader: []string{etag}, LengthHeader: []string{strconv.Itoa(len(body))}}
}

// lazyList is a list response built on first use.
type lazyList struct {
	once sync.Once
	list *List
}

func (l *lazyList) get(items func() []*Conn) *List {
	l.once.Do(func() {
		selected := items()
		l.list = NewList(AppendList(make([]byte, 0, ListSize(selected)), selected), "")
	})
	return l.list
}

// Items returns the Connections in order. The slice must not be modified.
func (s *Snapshot) Items() []*Conn { return s.items }

// Body returns the whole namespace's list response, built on first use and then shared by
// every key of the namespace that has no selector.
func (s *Snapshot) Body() *List { return s.whole.get(func() []*Conn { return s.items }) }

// SelectedBody returns the list response of the items sel matches, built on first use and
// shared by every key with the same selector (selectorKey is Key.SelectorKey).
func (s *Snapshot) SelectedBody(selectorKey string, sel labels.Selector) *List {
	if sel == nil {
		return s.Body()
	}
	v, ok := s.bySelector.Load(selectorKey)
	if !ok {
		v, _ = s.bySelector.LoadOrStore(selectorKey, &lazyList{})
	}
	return v.(*lazyList).get(func() []*Conn {
		var selected []*Conn
		for _, c := range s.items {
			if sel.Matches(c.Labels) {
				selected = append(selected, c)
			}
		}
		return selected
	})
}

// ListSize is the length of the list response of items.
func ListSize(items []*Conn) int {
	n := len(`{"connections":[]}`)
	for _, c := range items {
		n += len(c.JSON) + 1
	}
	return n
}

// AppendList appends the list response of items to dst: a concatenation of pre-encoded objects.
func AppendList(dst []byte, items []*Conn) []byte {
	dst = append(dst, `{"connections":[`...)
	for i, c := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c.JSON...)
	}
	return append(dst, "]}"...)
}

// ETag returns a strong entity tag for a response body and whatever else the response depends
// on (such as the next-page cursor).
func ETag(body []byte, extra string) string {
	d := xxhash.New()
	_, _ = d.Write(body)
	_, _ = d.WriteString(extra)
	var buf [18]byte
	b := append(buf[:0], '"')
	b = strconv.AppendUint(b, d.Sum64(), 36)
	b = append(b, '"')
	return string(b)
}

var emptySnapshot = &Snapshot{}

type nsState struct {
	byName map[string]*Conn
	snap   *Snapshot
}

// Connections returns the listable Connections of namespace ns.
func (x *Index) Connections(ns string) *Snapshot {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if st := x.conns[ns]; st != nil {
		return st.snap
	}
	return emptySnapshot
}

// SetConnection adds, replaces or (when it has no status.id yet) removes a Connection.
func (x *Index) SetConnection(c *switchboardv1alpha1.Connection) error {
	if c.Status.ID == "" {
		x.DeleteConnection(c.Namespace, c.Name)
		return nil
	}
	raw, err := EncodeConnection(c)
	if err != nil {
		x.DeleteConnection(c.Namespace, c.Name)
		return err
	}
	conn := &Conn{ID: c.Status.ID, Name: c.Name, Labels: labels.Set(c.Labels), JSON: raw}
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.conns[c.Namespace]
	if st == nil {
		st = &nsState{byName: map[string]*Conn{}, snap: emptySnapshot}
		x.conns[c.Namespace] = st
	}
	old := st.byName[c.Name]
	st.byName[c.Name] = conn
	items := st.snap.items
	if old != nil {
		items = remove(items, old)
	}
	st.snap = &Snapshot{items: insert(items, conn)}
	return nil
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
	st.snap = &Snapshot{items: remove(st.snap.items, old)}
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

// connectionJSON is the public form of a Connection, fields in the documented order. Nothing
// from spec.credentialsSecretRef is ever part of it.
type connectionJSON struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	DisplayName *string           `json:"display_name"`
	Provider    *string           `json:"provider"`
	Metadata    map[string]string `json:"metadata"`
	CreatedAt   string            `json:"created_at"`
}

// EncodeConnection returns the JSON of c as the /v1 API lists it.
func EncodeConnection(c *switchboardv1alpha1.Connection) ([]byte, error) {
	out := connectionJSON{
		ID:        c.Status.ID,
		Name:      c.Name,
		Metadata:  c.Spec.Metadata,
		CreatedAt: c.CreationTimestamp.UTC().Format(time.RFC3339),
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if c.Spec.DisplayName != "" {
		out.DisplayName = &c.Spec.DisplayName
	}
	if c.Spec.Provider != "" {
		out.Provider = &c.Spec.Provider
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, errorf("encoding Connection %s/%s: %v", c.Namespace, c.Name, err)
	}
	return raw, nil
}
