package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"k8s.io/apimachinery/pkg/labels"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
)

// The /v1 wire format: how a Connection and a list of them are encoded, and their ETags. Each
// Connection is encoded once, when it changes (cache.go); a list response is a concatenation of
// those encodings, built once per snapshot and selector and then shared (cachedList).

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

// encodeConnection returns the JSON of c as the /v1 API lists it.
func encodeConnection(c *switchboardv1alpha1.Connection) ([]byte, error) {
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
		return nil, fmt.Errorf("encoding Connection %s/%s: %w", c.Namespace, c.Name, err)
	}
	return raw, nil
}

// List is a ready list response.
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

// newList wraps body as a List; extra goes into the ETag with the body (a page's next cursor).
func newList(body []byte, extra string) *List {
	tag := etag(body, extra)
	return &List{Body: body, ETag: tag, ETagHeader: []string{tag}, LengthHeader: []string{strconv.Itoa(len(body))}}
}

// buildList makes the list response of items.
func buildList(items []*keyindex.Conn, extra string) *List {
	return newList(appendList(make([]byte, 0, listSize(items)), items), extra)
}

// cachedList returns the list response of the whole snapshot (sel nil) or of the items sel
// matches, built on first use and then shared by every key with the same selector.
func cachedList(snap *keyindex.Snapshot, selectorKey string, sel labels.Selector) *List {
	return snap.Memo(selectorKey, func(items []*keyindex.Conn) any {
		return buildList(selectItems(items, sel, 0), "")
	}).(*List)
}

// listSize is the length of the list response of items.
func listSize(items []*keyindex.Conn) int {
	n := len(`{"connections":[]}`)
	for _, c := range items {
		n += len(c.Encoded) + 1
	}
	return n
}

// appendList appends the list response of items to dst: a concatenation of pre-encoded objects.
func appendList(dst []byte, items []*keyindex.Conn) []byte {
	dst = append(dst, `{"connections":[`...)
	for i, c := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c.Encoded...)
	}
	return append(dst, "]}"...)
}

// etag returns a strong entity tag for a response body and whatever else the response depends
// on (such as the next-page cursor).
func etag(body []byte, extra string) string {
	d := xxhash.New()
	_, _ = d.Write(body)
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
