//go:build !unit

package server

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

// TestNamespaceIsolation is a property test: for random namespaces, Connections and keys, every
// key lists exactly the Connections of its own namespace that have an id, in id order.
func TestNamespaceIsolation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	type tenant struct {
		ns   string
		ids  []string
		keys []string
	}
	var tenants []tenant
	for i := range 2 + rng.IntN(4) {
		tn := tenant{ns: env.Namespace(t, fmt.Sprintf("iso%d", i))}
		for j := range rng.IntN(6) {
			id := fmt.Sprintf("conn_%x", rng.Uint64())
			tn.ids = append(tn.ids, id)
			newConnection(t, tn.ns, fmt.Sprintf("c%d", j), id, nil)
		}
		if rng.IntN(2) == 0 {
			newConnection(t, tn.ns, "no-id", "", nil)
		}
		for j := range 1 + rng.IntN(3) {
			tn.keys = append(tn.keys, newKey(t, tn.ns, fmt.Sprintf("k%d", j), switchboardv1alpha1.APIKeySpec{}).Key)
		}
		slices.Sort(tn.ids)
		if tn.ids == nil {
			tn.ids = []string{}
		}
		tenants = append(tenants, tn)
	}
	s := startServer(t, nil, nil, Deps{}, true)
	for _, tn := range tenants {
		for _, key := range tn.keys {
			got := ids(s.get(t, "/v1/connections", key).connections(t))
			if !slices.Equal(got, tn.ids) {
				t.Errorf("a key of %s lists %v, want exactly %v", tn.ns, got, tn.ids)
			}
		}
	}
}

// TestSelectorNarrowing: spec.connectionSelector narrows the list, with labels and expressions.
func TestSelectorNarrowing(t *testing.T) {
	ns := env.Namespace(t, "selector")
	newConnection(t, ns, "a", "conn_a", map[string]string{"team": "data", "tier": "prod"})
	newConnection(t, ns, "b", "conn_b", map[string]string{"team": "data", "tier": "dev"})
	newConnection(t, ns, "c", "conn_c", map[string]string{"team": "web"})
	newConnection(t, ns, "d", "conn_d", nil)
	tests := []struct {
		name string
		sel  *metav1.LabelSelector
		want []string
	}{
		{"no selector", nil, []string{"conn_a", "conn_b", "conn_c", "conn_d"}},
		{"empty selector", &metav1.LabelSelector{}, []string{"conn_a", "conn_b", "conn_c", "conn_d"}},
		{"matchLabels", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "data"}}, []string{"conn_a", "conn_b"}},
		{"matchExpressions", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dev"}},
		}}, []string{"conn_a", "conn_c", "conn_d"}},
		{"both", &metav1.LabelSelector{
			MatchLabels:      map[string]string{"team": "data"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"dev"}}},
		}, []string{"conn_b"}},
		{"matches nothing", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "nobody"}}, []string{}},
	}
	keys := make([]string, len(tests))
	for i, tt := range tests {
		keys[i] = newKey(t, ns, fmt.Sprintf("sel%d", i), switchboardv1alpha1.APIKeySpec{ConnectionSelector: tt.sel}).Key
	}
	s := startServer(t, nil, nil, Deps{}, true)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(s.get(t, "/v1/connections", keys[i]).connections(t)); !slices.Equal(got, tt.want) {
				t.Errorf("ids = %v, want %v", got, tt.want)
			}
			// Paged, the same items come back.
			if got := walk(t, s, keys[i], 1); !slices.Equal(got, tt.want) {
				t.Errorf("paged ids = %v, want %v", got, tt.want)
			}
		})
	}
}

var nextLink = regexp.MustCompile(`^<(/v1/connections\?[^>]+)>; rel="next"$`)

// walk follows Link rel="next" from ?limit=limit and returns every id seen.
func walk(t *testing.T, s *testServer, key string, limit int) []string {
	t.Helper()
	out := []string{}
	path := fmt.Sprintf("/v1/connections?limit=%d", limit)
	for pages := 0; path != ""; pages++ {
		if pages > 10000 {
			t.Fatal("the walk does not end")
		}
		resp := s.get(t, path, key)
		page := ids(resp.connections(t))
		if len(page) > limit {
			t.Fatalf("page of %d items for limit %d", len(page), limit)
		}
		out = append(out, page...)
		path = ""
		if link := resp.Header.Get("Link"); link != "" {
			m := nextLink.FindStringSubmatch(link)
			if m == nil {
				t.Fatalf("Link %q is not an RFC 8288 next link", link)
			}
			if len(page) != limit {
				t.Fatalf("a short page (%d of %d) announces a next page", len(page), limit)
			}
			path = m[1]
		}
	}
	return out
}

// TestPagination: a walk with any page size returns every item once, in order; bad values are
// refused with 400 INVALID_PARAMETER.
func TestPagination(t *testing.T) {
	ns := env.Namespace(t, "pages")
	var want []string
	for i := range 23 {
		id := fmt.Sprintf("conn_p%02d", (i*7)%23) // created out of order
		want = append(want, id)
		newConnection(t, ns, fmt.Sprintf("c%d", i), id, nil)
	}
	slices.Sort(want)
	k := newKey(t, ns, "pager", switchboardv1alpha1.APIKeySpec{})
	s := startServer(t, nil, noFailureLimit(nil), Deps{}, true)

	for _, limit := range []int{1, 2, 5, 22, 23, 24, 1000} {
		if got := walk(t, s, k.Key, limit); !slices.Equal(got, want) {
			t.Errorf("limit %d: walk = %v, want %v", limit, got, want)
		}
	}
	if got := ids(s.get(t, "/v1/connections", k.Key).connections(t)); !slices.Equal(got, want) {
		t.Errorf("without limit: %v, want all of %v", got, want)
	}
	if resp := s.get(t, "/v1/connections", k.Key); resp.Header.Get("Link") != "" {
		t.Errorf("a whole list has a Link header %q", resp.Header.Get("Link"))
	}

	// Items added and removed during a walk: what exists throughout is listed once.
	first := s.get(t, "/v1/connections?limit=5", k.Key)
	newConnection(t, ns, "late", "conn_a0late", nil) // sorts before the cursor: not seen
	m := nextLink.FindStringSubmatch(first.Header.Get("Link"))
	if m == nil {
		t.Fatal("no next link")
	}
	eventually(t, "the late Connection to be indexed", func() bool {
		return slices.Contains(ids(s.get(t, "/v1/connections", k.Key).connections(t)), "conn_a0late")
	})
	rest := ids(s.get(t, m[1], k.Key).connections(t))
	if got := append(ids(first.connections(t)), rest...); !slices.Equal(got[:10], want[:10]) {
		t.Errorf("walk across a change: %v, want to start %v", got, want[:10])
	}

	for _, q := range []string{"limit=0", "limit=1001", "limit=-1", "limit=abc", "limit=", "limit=1&limit=2",
		"cursor=", "cursor=nonsense", "cursor=" + strings.Repeat("A", 40), "limit=5&cursor=%zz"} {
		resp := s.get(t, "/v1/connections?"+q, k.Key)
		if resp.Status != http.StatusBadRequest || resp.errorCode(t) != apicode.InvalidParameter {
			t.Errorf("?%s: %d %s, want 400 INVALID_PARAMETER", q, resp.Status, resp.Body)
		}
	}
}

// TestETag: If-None-Match with the current ETag gives 304; a change gives a new ETag.
func TestETag(t *testing.T) {
	ns := env.Namespace(t, "etag")
	newConnection(t, ns, "one", "conn_one", map[string]string{"x": "y"})
	plain := newKey(t, ns, "plain", switchboardv1alpha1.APIKeySpec{})
	narrow := newKey(t, ns, "narrow", switchboardv1alpha1.APIKeySpec{ConnectionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}})
	s := startServer(t, nil, nil, Deps{}, true)
	for _, tc := range []struct{ name, key, query string }{
		{"whole namespace", plain.Key, ""}, {"selector", narrow.Key, ""}, {"page", plain.Key, "?limit=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := s.get(t, "/v1/connections"+tc.query, tc.key)
			etag := first.Header.Get("ETag")
			if first.Status != 200 || !strings.HasPrefix(etag, `"`) {
				t.Fatalf("status %d ETag %q", first.Status, etag)
			}
			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
				resp := s.request(t, http.MethodGet, "/v1/connections"+tc.query, func(h http.Header) {
					h.Set("Authorization", "Bearer "+tc.key)
					h.Set("If-None-Match", inm)
				})
				if resp.Status != http.StatusNotModified || len(resp.Body) != 0 || resp.Header.Get("ETag") != etag {
					t.Errorf("If-None-Match %s: %d %q, want 304 with the ETag", inm, resp.Status, resp.Body)
				}
			}
			resp := s.request(t, http.MethodGet, "/v1/connections"+tc.query, func(h http.Header) {
				h.Set("Authorization", "Bearer "+tc.key)
				h.Set("If-None-Match", `"stale"`)
			})
			if resp.Status != 200 {
				t.Errorf("a stale ETag gave %d, want 200", resp.Status)
			}
		})
	}
	before := s.get(t, "/v1/connections", plain.Key).Header.Get("ETag")
	newConnection(t, ns, "two", "conn_two", nil)
	eventually(t, "a new ETag after a change", func() bool {
		return s.get(t, "/v1/connections", plain.Key).Header.Get("ETag") != before
	})
}
