package v1api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"k8s.io/apimachinery/pkg/labels"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

// The /v1 wire format: how a Connection and a list of them are encoded, and their ETags. Each
// Connection is encoded once, when it changes (internal/server/indexfeed). A list response is a concatenation of
// those encodings: the namespace's whole list is built once per snapshot and shared; other lists
// are kept as the items they select, with their ETag and length, and written item by item
// (within a small byte budget per snapshot their bodies are built too). No request builds a body
// of its own, so a slow reader holds nothing that other requests do not share.

// connectionJSON is the public form of a Connection, fields in the documented order. Nothing
// from spec.credentialsSecretRef is ever part of it.
type connectionJSON struct {
	ID          string                                       `json:"id"`
	Name        string                                       `json:"name"`
	DisplayName *string                                      `json:"display_name"`
	Provider    *string                                      `json:"provider"`
	Metadata    map[string]switchboardv1alpha1.MetadataValue `json:"metadata"`
	CreatedAt   string                                       `json:"created_at"`
}

// MaxConnectionJSON is the most bytes the /v1 JSON of a Connection the CRD's schema admits can
// take (TestConnectionJSONIsBounded builds the largest one, 79,813 bytes): at most 32 KiB of
// metadata values, no control characters (tab, line feed and carriage return aside, in values),
// and `<`, `>`, `&` written as they are, so that no character takes more than twice its bytes.
// It is what one Connection can cost each replica's cache. A Connection stored before the
// schema had these rules can be larger; it is still listed (a list is never silently short),
// and the feed logs it.
const MaxConnectionJSON = 80 << 10

// EncodeConnection returns the JSON of c as the /v1 API lists it, for the index to keep. `<`, `>` and `&` are written
// as they are (encoding/json would write each as six bytes, \u003c): the API's responses are
// application/json with nosniff, never HTML, and the escape made a tenant's Connection six
// times the bytes it wrote.
func EncodeConnection(c *switchboardv1alpha1.Connection) ([]byte, error) {
	out := connectionJSON{
		ID:        c.Status.ID,
		Name:      c.Name,
		Metadata:  c.Spec.Metadata,
		CreatedAt: c.CreationTimestamp.UTC().Format(time.RFC3339),
	}
	if out.Metadata == nil {
		out.Metadata = map[string]switchboardv1alpha1.MetadataValue{}
	}
	if c.Spec.DisplayName != "" {
		out.DisplayName = &c.Spec.DisplayName
	}
	if c.Spec.Provider != "" {
		out.Provider = &c.Spec.Provider
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("encoding Connection %s/%s: %w", c.Namespace, c.Name, err)
	}
	// A copy of its own size: the buffer's spare capacity would stay in the cache with it.
	return append([]byte(nil), bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
}

// List is a ready list response: the items it lists, and its ETag and Content-Length, computed
// once from them.
type List struct {
	items []*keyindex.Conn
	// body is the whole response, when it was built; nil: the items are written one by one.
	body []byte
	// Length is the response's length in bytes.
	Length int
	// ETag is the response's quoted entity tag.
	ETag string
	// ETagHeader and LengthHeader are the ETag and Content-Length header values as
	// one-element slices, so that a response's header map takes them without allocating.
	// They must not be modified.
	ETagHeader, LengthHeader []string
}

// newList describes the list response of items; extra goes into the ETag with the body (a
// page's next cursor). It builds no body: the body is the items, written in turn.
func newList(items []*keyindex.Conn, extra string) *List {
	tag, n := listETag(items, extra), listSize(items)
	return &List{items: items, Length: n, ETag: tag, ETagHeader: []string{tag}, LengthHeader: []string{strconv.Itoa(n)}}
}

// build makes the body in one piece, to be written in one call. Only shared lists are built.
func (l *List) build() *List {
	l.body = appendList(make([]byte, 0, l.Length), l.items)
	return l
}

// Body returns the whole response (built here when it was not), for tests.
func (l *List) Body() []byte {
	if l.body != nil {
		return l.body
	}
	return appendList(make([]byte, 0, l.Length), l.items)
}

// Shared pieces of every list body. They must not be modified.
var (
	listOpen  = []byte(`{"connections":[`)
	listComma = []byte(",")
	listClose = []byte("]}")
)

// writeTo writes the response to w: the built body, or the list's pieces in order, each a
// slice shared with the index (nothing is copied for this request). It stops at the first
// error (the client went away, or the write timeout passed).
func (l *List) writeTo(w io.Writer) error {
	if l.body != nil {
		_, err := w.Write(l.body)
		return err
	}
	if _, err := w.Write(listOpen); err != nil {
		return err
	}
	for i, c := range l.items {
		if i > 0 {
			if _, err := w.Write(listComma); err != nil {
				return err
			}
		}
		if _, err := w.Write(c.Encoded); err != nil {
			return err
		}
	}
	_, err := w.Write(listClose)
	return err
}

// namespaceList is what a snapshot memoizes under the empty key: the namespace's whole list,
// built, and the bytes of selected lists' bodies the snapshot may still build.
type namespaceList struct {
	all    *List
	budget atomic.Int64
}

// SelectedBodyBudget is how many bytes of selected lists' bodies one namespace snapshot builds
// and keeps, besides its whole list: enough for small namespaces with a few selectors to be
// answered in one write, while a namespace of any size with any number of selectors holds at
// most one copy of its list plus this. Past it, selected lists are written item by item.
const SelectedBodyBudget = 64 << 10

// reserve takes n bytes of the budget, or reports false when they are not left.
func (nl *namespaceList) reserve(n int) bool {
	if nl.budget.Add(-int64(n)) >= 0 {
		return true
	}
	nl.budget.Add(int64(n))
	return false
}

// cachedList returns the list response of the whole snapshot (sel nil) or of the items sel
// matches, made on first use and then shared by every key with the same selector. Past
// keyindex.MaxMemos selectors, it is made for each request, without a body.
func cachedList(snap *keyindex.Snapshot, selectorKey string, sel labels.Selector) *List {
	ns := keyindex.Memo(snap, "", func(items []*keyindex.Conn, _ bool) *namespaceList {
		nl := &namespaceList{all: newList(items, "").build()}
		nl.budget.Store(SelectedBodyBudget)
		return nl
	})
	if selectorKey == "" {
		return ns.all
	}
	return keyindex.Memo(snap, selectorKey, func(items []*keyindex.Conn, kept bool) *List {
		selected := selectItems(items, sel, 0)
		if len(selected) == len(items) {
			return ns.all // a selector that matches everything lists what the namespace's list does
		}
		l := newList(selected, "")
		if kept && ns.reserve(l.Length) {
			l.build()
		}
		return l
	})
}

// listSize is the length of the list response of items.
func listSize(items []*keyindex.Conn) int {
	n := len(listOpen) + len(listClose)
	for i, c := range items {
		if i > 0 {
			n += len(listComma)
		}
		n += len(c.Encoded)
	}
	return n
}

// appendList appends the list response of items to dst: a concatenation of pre-encoded objects.
func appendList(dst []byte, items []*keyindex.Conn) []byte {
	dst = append(dst, listOpen...)
	for i, c := range items {
		if i > 0 {
			dst = append(dst, listComma...)
		}
		dst = append(dst, c.Encoded...)
	}
	return append(dst, listClose...)
}

// listETag returns a strong entity tag for the list response of items and whatever else the
// response depends on (such as the next-page cursor), hashing the body's pieces in order
// without putting them together.
func listETag(items []*keyindex.Conn, extra string) string {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(listOpen)
	for i, c := range items {
		if i > 0 {
			_, _ = d.Write(listComma)
		}
		_, _ = d.Write(c.Encoded)
	}
	_, _ = d.Write(listClose)
	_, _ = d.WriteString(extra)
	var buf [18]byte
	b := append(buf[:0], '"')
	b = strconv.AppendUint(b, d.Sum64(), 36)
	b = append(b, '"')
	return string(b)
}

// etagMatches implements If-None-Match's weak comparison (RFC 9110 section 13.1.2).
func etagMatches(header, etag string) bool {
	for _, candidate := range strings.Split(header, ",") {
		candidate = strings.TrimSpace(candidate)
		if candidate == "*" || strings.TrimPrefix(candidate, "W/") == etag {
			return true
		}
	}
	return false
}
