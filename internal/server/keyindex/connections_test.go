package keyindex

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func conn(name, id string) *Conn {
	return &Conn{ID: id, Name: name, Labels: labels.Set{"n": name}, Encoded: []byte(id)}
}

func listIDs(s *Snapshot) string {
	var ids []string
	for _, c := range s.Items() {
		ids = append(ids, c.ID+"/"+c.Name)
	}
	return strings.Join(ids, ",")
}

// TestConnections: a namespace's Connections are kept in id, then name, order; a change makes a
// new snapshot and leaves earlier ones as they were; namespaces are apart.
func TestConnections(t *testing.T) {
	x := New()
	x.SetConnection("a", conn("c", "conn_3"))
	x.SetConnection("a", conn("a", "conn_1"))
	x.SetConnection("a", conn("b", "conn_2"))
	x.SetConnection("a", conn("dup", "conn_2")) // same id, ordered by name
	x.SetConnection("b", conn("z", "conn_0"))
	if got, want := listIDs(x.Connections("a")), "conn_1/a,conn_2/b,conn_2/dup,conn_3/c"; got != want {
		t.Fatalf("namespace a = %s, want %s", got, want)
	}
	before := x.Connections("a")
	x.SetConnection("a", conn("a", "conn_9")) // moves to the end
	x.DeleteConnection("a", "b")
	x.DeleteConnection("a", "nothing-by-this-name")
	if got, want := listIDs(x.Connections("a")), "conn_2/dup,conn_3/c,conn_9/a"; got != want {
		t.Errorf("after changes = %s, want %s", got, want)
	}
	if got := listIDs(before); got != "conn_1/a,conn_2/b,conn_2/dup,conn_3/c" {
		t.Errorf("an earlier snapshot changed: %s", got)
	}
	x.DeleteConnection("b", "z")
	if got := listIDs(x.Connections("b")); got != "" {
		t.Errorf("emptied namespace = %s", got)
	}
	if s := x.Stats(); s.Namespaces != 1 || s.Connections != 3 {
		t.Errorf("stats = %+v, want 1 namespace with 3 Connections", s)
	}
	if got := listIDs(x.Connections("nowhere")); got != "" {
		t.Errorf("unknown namespace = %s", got)
	}
	if got := After(x.Connections("a").Items(), "conn_2", "dup"); got != 1 {
		t.Errorf("After = %d, want 1", got)
	}
	if got := After(x.Connections("a").Items(), "conn_5", "zzz"); got != 2 {
		t.Errorf("After a missing key = %d, want 2", got)
	}
}

// TestMemo: what a reader derives from a snapshot is built once per key and snapshot, and a
// change of the namespace starts afresh.
func TestMemo(t *testing.T) {
	x := New()
	x.SetConnection("a", conn("one", "conn_1"))
	builds := 0
	count := func(items []*Conn, _ bool) int { builds++; return len(items) }
	snap := x.Connections("a")
	for range 3 {
		if Memo(snap, "", count) != 1 || Memo(snap, "n=one", count) != 1 {
			t.Fatal("Memo returned another value")
		}
	}
	if builds != 2 {
		t.Errorf("built %d times for two keys, want 2", builds)
	}
	x.SetConnection("a", conn("two", "conn_2"))
	if got := Memo(x.Connections("a"), "", count); got != 2 || builds != 3 {
		t.Errorf("after a change: %v after %d builds, want 2 after 3", got, builds)
	}
	if Memo(snap, "", count) != 1 {
		t.Error("the old snapshot's memo changed")
	}
}

// TestMemoIsBounded: a snapshot keeps at most MaxMemos keys besides the empty one; a key past
// them is built for each call, and the keys it kept stay memoized.
func TestMemoIsBounded(t *testing.T) {
	x := New()
	x.SetConnection("a", conn("one", "conn_1"))
	snap := x.Connections("a")
	builds, kept := 0, 0
	count := func(items []*Conn, keep bool) any {
		builds++
		if keep {
			kept++
		}
		return len(items)
	}
	for i := range MaxMemos {
		Memo(snap, fmt.Sprintf("k=%d", i), count)
	}
	Memo(snap, "", count)
	if builds != MaxMemos+1 || kept != builds {
		t.Fatalf("built %d times (%d told kept) for %d keys, want %d", builds, kept, MaxMemos+1, MaxMemos+1)
	}
	for range 3 {
		if Memo(snap, "past=bound", count) != 1 {
			t.Fatal("Memo returned another value past the bound")
		}
	}
	if kept != MaxMemos+1 {
		t.Errorf("a value built past the bound was told it is kept (%d times)", kept-MaxMemos-1)
	}
	if builds != MaxMemos+4 {
		t.Errorf("a key past the bound was built %d times in 3 calls, want 3", builds-MaxMemos-1)
	}
	Memo(snap, "k=0", count)
	Memo(snap, "", count)
	if builds != MaxMemos+4 {
		t.Error("a kept key was built again")
	}
	if n := snap.memos.Load(); n != MaxMemos {
		t.Errorf("memos = %d, want %d", n, MaxMemos)
	}
}

// TestSnapshotBuiltOnRead: changes nobody has read yet (the informer's initial list) are sorted
// once, at the first read; a snapshot a reader has had is never changed by later writes; and a
// namespace read between writes stays in order.
func TestSnapshotBuiltOnRead(t *testing.T) {
	x := New()
	for i := 999; i >= 0; i-- {
		x.SetConnection("a", conn(fmt.Sprintf("c%03d", i), fmt.Sprintf("conn_%03d", (i*7)%1000)))
	}
	x.DeleteConnection("a", "c500")
	first := x.Connections("a")
	items := first.Items()
	if len(items) != 999 {
		t.Fatalf("%d items, want 999", len(items))
	}
	for i := 1; i < len(items); i++ {
		if !items[i-1].Less(items[i].ID, items[i].Name) {
			t.Fatalf("items %d and %d out of order: %s/%s, %s/%s", i-1, i, items[i-1].ID, items[i-1].Name, items[i].ID, items[i].Name)
		}
	}
	if x.Connections("a") != first {
		t.Error("a second read without a change built another snapshot")
	}
	x.SetConnection("a", conn("new", "conn_0005"))
	x.DeleteConnection("a", "c001")
	if len(first.Items()) != 999 || listIDs(first) != listIDs(&Snapshot{items: items}) {
		t.Error("a snapshot a reader had changed after writes")
	}
	next := x.Connections("a").Items()
	if len(next) != 999 {
		t.Fatalf("%d items after one add and one delete, want 999", len(next))
	}
	for i := 1; i < len(next); i++ {
		if !next[i-1].Less(next[i].ID, next[i].Name) {
			t.Fatalf("after changes, items %d and %d out of order", i-1, i)
		}
	}
}

// BenchmarkInitialSync fills one namespace the way an informer's initial list does, with no
// read in between, then reads it once: the cost of a server's start per namespace size.
func BenchmarkInitialSync(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		conns := make([]*Conn, n)
		for i := range conns {
			conns[i] = conn(fmt.Sprintf("c%06d", i), fmt.Sprintf("conn_%06d", (i*7919)%n))
		}
		b.Run(fmt.Sprintf("connections=%d", n), func(b *testing.B) {
			for b.Loop() {
				x := New()
				for _, c := range conns {
					x.SetConnection("a", c)
				}
				if len(x.Connections("a").Items()) != n {
					b.Fatal("lost Connections")
				}
			}
		})
	}
}
