package v1api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
	"github.com/switchboard-dev/switchboard/internal/testenv/fixture"
)

func TestEncodeConnection(t *testing.T) {
	raw, err := EncodeConnection(fixture.Connection("a", "warehouse", "conn_1"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"conn_1","name":"warehouse","display_name":"D warehouse","provider":"postgres","metadata":{"a":"1","b":"2"},"created_at":"2026-11-22T04:00:00Z"}`
	if string(raw) != want {
		t.Errorf("got  %s\nwant %s", raw, want)
	}
	bare := fixture.Connection("a", "bare", "conn_2")
	bare.Spec = switchboardv1alpha1.ConnectionSpec{}
	raw, err = EncodeConnection(bare)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"id":"conn_2","name":"bare","display_name":null,"provider":null,"metadata":{},"created_at":"2026-11-22T04:00:00Z"}`
	if string(raw) != want {
		t.Errorf("got  %s\nwant %s", raw, want)
	}
	if !json.Valid(raw) {
		t.Error("not JSON")
	}
}

// TestListBodies: list responses are built from the index's snapshots, change with the list,
// are shared per snapshot and selector, and describe themselves in their headers.
func TestListBodies(t *testing.T) {
	x := keyindex.New()
	set := func(c *switchboardv1alpha1.Connection) {
		t.Helper()
		setConnection(t, x, c)
	}
	whole := func(ns string) *List { return cachedList(x.Connections(ns), "", nil) }
	set(fixture.Connection("a", "c", "conn_3"))
	set(fixture.Connection("a", "a", "conn_1"))
	set(fixture.Connection("a", "b", "conn_2"))
	set(fixture.Connection("a", "dup", "conn_2"))
	set(fixture.Connection("b", "z", "conn_0"))
	before := whole("a")
	if got := listedIDs(t, before.Body()); got != "conn_1,conn_2,conn_2,conn_3" {
		t.Fatalf("namespace a lists %s", got)
	}
	set(fixture.Connection("a", "a", "conn_9"))
	x.DeleteConnection("a", "b")
	list := whole("a")
	body, tag := list.Body(), list.ETag
	if got := listedIDs(t, body); got != "conn_2,conn_3,conn_9" {
		t.Errorf("after changes: %s", got)
	}
	if list.LengthHeader[0] != strconv.Itoa(len(body)) || list.ETagHeader[0] != tag {
		t.Errorf("header values %v %v do not describe the body", list.LengthHeader, list.ETagHeader)
	}
	if tag == before.ETag || string(body) == string(before.Body()) {
		t.Error("the ETag or body did not change with the list")
	}
	if whole("a") != list {
		t.Error("the whole list is not shared")
	}
	x.DeleteConnection("b", "z")
	if b := whole("b").Body(); string(b) != `{"connections":[]}` {
		t.Errorf("empty namespace = %s", b)
	}
	if b := whole("nowhere").Body(); string(b) != `{"connections":[]}` {
		t.Errorf("unknown namespace = %s", b)
	}
	sel := labels.SelectorFromSet(labels.Set{"n": "dup"})
	selected := cachedList(x.Connections("a"), sel.String(), sel)
	body, tag = selected.Body(), selected.ETag
	if !strings.Contains(string(body), `"name":"dup"`) || strings.Contains(string(body), `"name":"a"`) || tag == "" {
		t.Errorf("selected body = %s", body)
	}
	if again := cachedList(x.Connections("a"), sel.String(), sel); &again.Body()[0] != &body[0] {
		t.Error("the selected body is not cached")
	}
}

// TestInvalidSelectorListsNothing: an APIKey whose selector does not parse lists nothing, even
// when a key without a selector in the same namespace has the whole list ready.
func TestInvalidSelectorListsNothing(t *testing.T) {
	a, _ := memoryHandler(t, 1, 3, nil)
	bad := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "bad", UID: "bad"}}
	bad.Spec.ConnectionSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	if err := keyindextest.PutAPIKey(a.index, bad); err == nil {
		t.Fatal("the invalid selector was accepted")
	}
	snap := a.index.Connections("tenant")
	if n := len(snap.Items()); n != 3 || len(cachedList(snap, "", nil).Body()) < 100 {
		t.Fatalf("the namespace has %d Connections and no whole list", n)
	}
	for _, k := range a.index.Keys() {
		if k.UID == "bad" {
			if got := cachedList(snap, k.SelectorKey, k.Selector).Body(); string(got) != `{"connections":[]}` {
				t.Errorf("the key with an invalid selector lists %s", got)
			}
		}
	}
}

func listedIDs(t *testing.T, body []byte) string {
	t.Helper()
	var v struct {
		Connections []struct {
			ID string `json:"id"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	ids := make([]string, 0, len(v.Connections))
	for _, c := range v.Connections {
		ids = append(ids, c.ID)
	}
	return strings.Join(ids, ",")
}

func benchItems(b *testing.B, n int) []*keyindex.Conn {
	x := keyindex.New()
	for i := range n {
		setConnection(b, x, fixture.Connection("ns", fmt.Sprintf("c%05d", i), fmt.Sprintf("conn_%05d", i)))
	}
	return x.Connections("ns").Items()
}

// BenchmarkAppendList measures building a list response from pre-encoded Connections, the
// per-request work for a page.
func BenchmarkAppendList(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			items := benchItems(b, n)
			buf := make([]byte, 0, 1<<20)
			b.ReportAllocs()
			for b.Loop() {
				buf = appendList(buf[:0], items)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

// BenchmarkEncodeConnection measures the one-time encoding done when a Connection changes.
func BenchmarkEncodeConnection(b *testing.B) {
	c := fixture.Connection("ns", "warehouse", "conn_1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeConnection(c); err != nil {
			b.Fatal(err)
		}
	}
}
