//go:build !unit

package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
	"github.com/switchboard-dev/switchboard/internal/keyindex/keyindextest"
)

func TestEncodeConnection(t *testing.T) {
	raw, err := encodeConnection(wireConnection("a", "warehouse", "conn_1"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"conn_1","name":"warehouse","display_name":"D warehouse","provider":"postgres","metadata":{"a":"1","b":"2"},"created_at":"2026-11-22T04:00:00Z"}`
	if string(raw) != want {
		t.Errorf("got  %s\nwant %s", raw, want)
	}
	bare := wireConnection("a", "bare", "conn_2")
	bare.Spec = switchboardv1alpha1.ConnectionSpec{}
	raw, err = encodeConnection(bare)
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

// TestListBodies: list responses are built from the index's snapshots through the feed, change
// with the list, are shared per snapshot and selector, and describe themselves in their headers.
func TestListBodies(t *testing.T) {
	x := keyindex.New()
	feed := feedConnections(x, logr.Discard())
	set := func(c *switchboardv1alpha1.Connection) {
		t.Helper()
		obj, err := compactConnection(c)
		if err != nil {
			t.Fatal(err)
		}
		feed.OnUpdate(nil, obj)
	}
	whole := func(ns string) *List { return cachedList(x.Connections(ns), "", nil) }
	set(wireConnection("a", "c", "conn_3"))
	set(wireConnection("a", "a", "conn_1"))
	set(wireConnection("a", "b", "conn_2"))
	set(wireConnection("a", "dup", "conn_2"))
	set(wireConnection("a", "noid", ""))
	set(wireConnection("b", "z", "conn_0"))
	before := whole("a")
	if got := listedIDs(t, before.Body()); got != "conn_1,conn_2,conn_2,conn_3" {
		t.Fatalf("namespace a lists %s", got)
	}
	set(wireConnection("a", "a", "conn_9"))
	obj, _ := compactConnection(wireConnection("a", "b", "conn_2"))
	feed.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "a/b", Obj: obj})
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
	feed.OnDelete(&cachedConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "z"}})
	if b := whole("b").Body(); string(b) != `{"connections":[]}` {
		t.Errorf("empty namespace = %s", b)
	}
	if b := whole("nowhere").Body(); string(b) != `{"connections":[]}` {
		t.Errorf("unknown namespace = %s", b)
	}
	// Losing its id removes a Connection from the list.
	set(wireConnection("a", "c", ""))
	if got := listedIDs(t, whole("a").Body()); got != "conn_2,conn_9" {
		t.Errorf("after c lost its id: %s", got)
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
	feed := feedConnections(x, logr.Discard())
	for i := range n {
		obj, err := compactConnection(wireConnection("ns", fmt.Sprintf("c%05d", i), fmt.Sprintf("conn_%05d", i)))
		if err != nil {
			b.Fatal(err)
		}
		feed.OnAdd(obj, true)
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
	c := wireConnection("ns", "warehouse", "conn_1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeConnection(c); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConnectionJSONIsBounded builds the Connection whose /v1 JSON is the largest the CRD's
// schema admits — every field at its limit, written in the characters that JSON escapes into
// the most bytes (U+2028, six bytes for three) — has the API server admit it, and checks that
// its JSON fits MaxConnectionJSON. It also checks that HTML characters cost what they weigh:
// the Connection of issue 18 (50 values of 500 `<`) was 6 bytes per `<`.
func TestConnectionJSONIsBounded(t *testing.T) {
	ns := env.Namespace(t, "bounded")
	const sep = "\u2028" // 3 bytes of UTF-8, 6 in JSON: the costliest character admitted
	metadata := map[string]switchboardv1alpha1.MetadataValue{}
	left := 32768 / 3 // characters of U+2028 that fit the 32 KiB of values
	for i := range 50 {
		key := strings.Repeat(sep, 39) + string(rune(0x1F600+i)) // 40 characters, distinct
		n := min(500, left)
		left -= n
		metadata[key] = switchboardv1alpha1.MetadataValue(strings.Repeat(sep, n))
	}
	name := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	worst := &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: switchboardv1alpha1.ConnectionSpec{
			DisplayName: strings.Repeat(sep, 256), Provider: strings.Repeat("p", 128), Metadata: metadata,
		},
	}
	if err := env.Client.Create(ctx(t), worst); err != nil {
		t.Fatalf("the API server refuses the largest Connection: %v", err)
	}
	worst.Status.ID = "conn_" + strings.Repeat("z", 59)
	if err := env.Client.Status().Update(ctx(t), worst); err != nil {
		t.Fatal(err)
	}
	raw, err := encodeConnection(worst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the largest Connection the schema admits is %d bytes of /v1 JSON (MaxConnectionJSON %d)", len(raw), MaxConnectionJSON)
	if len(raw) > MaxConnectionJSON || len(raw) < MaxConnectionJSON*9/10 || !json.Valid(raw) {
		t.Errorf("the largest Connection's JSON is %d bytes; MaxConnectionJSON (%d) should be just above it", len(raw), MaxConnectionJSON)
	}
	// One more byte of metadata, and the API server refuses it.
	over := worst.DeepCopy()
	over.ResourceVersion, over.Name, over.Status = "", "over", switchboardv1alpha1.ConnectionStatus{}
	over.Spec.Metadata[strings.Repeat(sep, 39)+string(rune(0x1F600+49))] = "xyz" // 32,766 + 3 bytes
	if err := env.Client.Create(ctx(t), over); err == nil || !strings.Contains(err.Error(), "32768 bytes") {
		t.Errorf("a Connection with more than 32 KiB of metadata values: %v", err)
	}

	html := wireConnection("a", "html", "conn_html")
	html.Spec.Metadata = map[string]switchboardv1alpha1.MetadataValue{}
	for i := range 50 {
		html.Spec.Metadata[fmt.Sprintf("k%02d", i)] = switchboardv1alpha1.MetadataValue(strings.Repeat("<", 500))
	}
	raw, err = encodeConnection(html)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 50*(500+10)+200 || !strings.Contains(string(raw), strings.Repeat("<", 500)) {
		t.Errorf("50 values of 500 `<` are %d bytes of JSON, want about 25,500", len(raw))
	}
	var back connectionJSON
	if err := json.Unmarshal(raw, &back); err != nil || string(back.Metadata["k07"]) != strings.Repeat("<", 500) {
		t.Errorf("the unescaped JSON does not read back: %v", err)
	}
}
