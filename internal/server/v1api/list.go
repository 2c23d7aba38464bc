package v1api

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/apierror"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

// MaxLimit is the largest page size a client may ask for.
const MaxLimit = 1000

// page is what the query asks for: everything (limit 0), or limit items after a cursor.
type page struct {
	limit     int
	afterID   string
	afterName string
	hasCursor bool
}

// parsePage reads ?limit and ?cursor. Other parameters are ignored, as most APIs do.
func parsePage(rawQuery string) (page, string) {
	var p page
	if rawQuery == "" {
		return p, ""
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return p, "The query string cannot be parsed."
	}
	if vs, ok := q["limit"]; ok {
		if len(vs) != 1 {
			return p, "limit may be given once."
		}
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 1 || n > MaxLimit || strings.TrimLeft(vs[0], "0123456789") != "" {
			return p, "limit must be an integer from 1 to " + strconv.Itoa(MaxLimit) + "."
		}
		p.limit = n
	}
	if vs, ok := q["cursor"]; ok {
		if len(vs) != 1 {
			return p, "cursor may be given once."
		}
		id, name, ok := decodeCursor(vs[0])
		if !ok {
			return p, "cursor is not one this API issued; pass the Link header's URL as it is."
		}
		p.afterID, p.afterName, p.hasCursor = id, name, true
	}
	return p, ""
}

// A cursor is the sort key of the last item of a page, so a walk stays correct while
// Connections come and go: nothing is listed twice, and what exists throughout is listed once.
const cursorVersion = "c1\n"

func encodeCursor(c *keyindex.Conn) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + c.ID + "\n" + c.Name))
}

func decodeCursor(s string) (id, name string, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(raw), cursorVersion) {
		return "", "", false
	}
	id, name, ok = strings.Cut(string(raw[len(cursorVersion):]), "\n")
	return id, name, ok && id != "" && name != ""
}

// listConnections answers GET /v1/connections for key. Without a page, the list memoized for
// the namespace's snapshot (or for the key's selector) is written; a page is described per
// request (its items, ETag and length) and written item by item. Either way the bytes written
// are the index's pre-encoded Connections, shared: no request builds a body of its own. It
// returns the status it answered.
func (a *api) listConnections(w http.ResponseWriter, r *http.Request, key *keyindex.Key) int {
	p, problem := parsePage(r.URL.RawQuery)
	if problem != "" {
		apierror.Write(w, http.StatusBadRequest, apicode.InvalidParameter, problem)
		return http.StatusBadRequest
	}
	snap := a.index.Connections(key.Namespace)
	var list *List
	var next string
	if p.limit == 0 && !p.hasCursor {
		list = cachedList(snap, key.SelectorKey, key.Selector)
	} else {
		items := snap.Items()
		if p.hasCursor {
			items = items[keyindex.After(items, p.afterID, p.afterName):]
		}
		selected := selectItems(items, key.Selector, p.limit)
		if p.limit > 0 && len(selected) == p.limit && hasMore(items, key.Selector, selected[len(selected)-1]) {
			next = encodeCursor(selected[len(selected)-1])
		}
		list = newList(selected, next)
	}
	// Direct map access: incoming header keys are canonical, and Get would canonicalise again.
	inm := r.Header["If-None-Match"]
	notModified := len(inm) > 0 && inm[0] != "" && etagMatches(inm[0], list.ETag)
	if n := int64(list.Length); n > uncountedBody && a.maxInFlight > 0 && !notModified && r.Method != http.MethodHead {
		// The bytes of the namespace's responses being written count until written: a slow
		// reader holds what it is sent, so what one tenant's readers hold is bounded.
		if inFlight := snap.InFlight(); inFlight != nil {
			if total := inFlight.Add(n); total != n && total > a.maxInFlight {
				inFlight.Add(-n)
				concurrencyRefused.Inc()
				w.Header().Set("Retry-After", "1")
				apierror.Write(w, http.StatusTooManyRequests, apicode.TooManyConcurrent, msgTooManyConcurrent)
				return http.StatusTooManyRequests
			}
			defer inFlight.Add(-n)
		}
	}
	// Shared, never modified header values: a map assignment allocates nothing, Set would.
	hdr := w.Header()
	hdr["Content-Type"] = headerJSON
	hdr["Cache-Control"] = headerPrivateNoCache
	hdr["Vary"] = headerVaryAuthorization
	hdr["Etag"] = list.ETagHeader
	if next != "" {
		q := "limit=" + strconv.Itoa(p.limit) + "&cursor=" + next
		hdr.Set("Link", "<"+routeConnections+"?"+q+`>; rel="next"`)
	}
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	hdr["Content-Length"] = list.LengthHeader
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_ = list.writeTo(w)
	}
	return http.StatusOK
}

// uncountedBody is the largest response not counted in flight. net/http copies a body this small
// into the connection's own buffers before the handler returns, so it holds nothing of the
// index however slowly it is read (the connection's buffers are the connection's cost, whatever
// it asked for); a larger one is written from the shared slices while the handler waits.
const uncountedBody = 2048

// Header values every list response carries, shared by all of them. They must not be modified.
var (
	headerJSON              = []string{"application/json"}
	headerPrivateNoCache    = []string{"private, no-cache"}
	headerVaryAuthorization = []string{"Authorization"}
)

// selectItems returns up to limit (0: all) items that sel matches (nil: all).
func selectItems(items []*keyindex.Conn, sel labels.Selector, limit int) []*keyindex.Conn {
	if sel == nil {
		if limit > 0 && limit < len(items) {
			return items[:limit]
		}
		return items
	}
	out := make([]*keyindex.Conn, 0, min(len(items), max(limit, 16)))
	for _, c := range items {
		if sel.Matches(c.Labels) {
			out = append(out, c)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out
}

// hasMore reports whether an item after last matches sel, so the last page has no next link.
func hasMore(items []*keyindex.Conn, sel labels.Selector, last *keyindex.Conn) bool {
	for _, c := range items[keyindex.After(items, last.ID, last.Name):] {
		if sel == nil || sel.Matches(c.Labels) {
			return true
		}
	}
	return false
}
