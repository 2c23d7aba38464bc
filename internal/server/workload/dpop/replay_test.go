package dpop_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop"
)

const window = time.Minute

// TestReplayCacheNeverAcceptsAReplay: whatever evicts an id early (its key's budget spent, its
// shard full), the id is refused again until its proof leaves the window.
func TestReplayCacheNeverAcceptsAReplay(t *testing.T) {
	c := dpop.NewReplayCache(window, dpop.ReplayOptions{MaxEntries: 16 * 64, PerKey: 32})
	// One key makes ten times its budget of proofs, one a millisecond, in the same second.
	for i := range 320 {
		if err := c.Add("flooder", fmt.Sprint("id-", i), now, now.Add(time.Duration(i)*time.Millisecond)); err != nil {
			if dpop.ReasonOf(err) != dpop.ReasonStale {
				t.Fatalf("id %d: %v", i, err)
			}
		}
	}
	for i := range 320 {
		err := c.Add("flooder", fmt.Sprint("id-", i), now, now.Add(time.Second))
		if r := dpop.ReasonOf(err); r != dpop.ReasonReplayed && r != dpop.ReasonStale {
			t.Errorf("id %d again: %v, want refused", i, err)
		}
	}
	// The next second's proofs are above the key's floor: a key over its budget loses only the
	// surplus of one second.
	if err := c.Add("flooder", "next-second", now.Add(time.Second), now.Add(time.Second)); err != nil {
		t.Errorf("a proof of the next second: %v", err)
	}
}

// TestReplayCacheFloodLeavesOthers: a flood of distinct ids from one key, or from a few keys
// sharing shards with others (64 keys over 16 shards, each spending its budget), leaves every
// other key's ids in place (refused as replays, not merely as stale), and the cache never holds
// more than its cap.
func TestReplayCacheFloodLeavesOthers(t *testing.T) {
	const maxEntries = 16 * 64
	c := dpop.NewReplayCache(window, dpop.ReplayOptions{MaxEntries: maxEntries, PerKey: 32})
	quiet := addQuiet(t, c)
	for i := range 100_000 {
		at := now.Add(time.Duration(i%50) * time.Second)
		_ = c.Add("flooder", fmt.Sprint("flood-", i), at, at)
		_ = c.Add(fmt.Sprint("flooder-", i%64), fmt.Sprint("flood-", i), at, at)
		if n := c.Len(); n > maxEntries {
			t.Fatalf("after %d ids the cache holds %d places, cap %d", i, n, maxEntries)
		}
	}
	for _, k := range quiet {
		for i := range 3 {
			if err := c.Add(k, fmt.Sprint("id-", i), now, now.Add(time.Second)); dpop.ReasonOf(err) != dpop.ReasonReplayed {
				t.Errorf("%s id %d again after the flood: %v, want replayed", k, i, err)
			}
		}
	}
}

// TestReplayCacheBeyondCapacity: more keys than the cache has places for, each within its
// budget: the cap holds, and no id is accepted twice, though some are then refused as stale
// (their key's floor raised) and some new keys wait for the window (the places all hold floors
// still needed): the cap sizes the keys a replica serves in one window.
func TestReplayCacheBeyondCapacity(t *testing.T) {
	const maxEntries = 16 * 64
	c := dpop.NewReplayCache(window, dpop.ReplayOptions{MaxEntries: maxEntries, PerKey: 32})
	quiet := addQuiet(t, c)
	refused := 0
	for k := range 2_000 {
		for i := range 8 {
			if err := c.Add(fmt.Sprint("crowd-", k), fmt.Sprint("id-", i), now, now); err != nil {
				refused++
			}
		}
		if n := c.Len(); n > maxEntries {
			t.Fatalf("after %d keys of the crowd the cache holds %d places, cap %d", k, n, maxEntries)
		}
	}
	t.Logf("%d of %d ids of the crowd refused at capacity", refused, 2_000*8)
	for _, k := range quiet {
		for i := range 3 {
			if err := c.Add(k, fmt.Sprint("id-", i), now, now.Add(time.Second)); err == nil {
				t.Errorf("%s id %d accepted twice", k, i)
			}
		}
	}
	for k := range 2_000 {
		if err := c.Add(fmt.Sprint("crowd-", k), "id-0", now, now.Add(time.Second)); err == nil {
			t.Errorf("crowd-%d id-0 accepted twice", k)
		}
	}
}

// addQuiet gives three keys three ids each, and returns the keys.
func addQuiet(t *testing.T, c *dpop.ReplayCache) []string {
	t.Helper()
	quiet := []string{"quiet-a", "quiet-b", "quiet-c"}
	for _, k := range quiet {
		for i := range 3 {
			if err := c.Add(k, fmt.Sprint("id-", i), now, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	return quiet
}

// TestReplayCacheExpires: ids leave once their proof is older than the window, and the places
// they held are free again.
func TestReplayCacheExpires(t *testing.T) {
	c := dpop.NewReplayCache(window, dpop.ReplayOptions{})
	for i := range 100 {
		if err := c.Add("k", fmt.Sprint("id-", i), now, now); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != 101 {
		t.Fatalf("Len = %d, want 101 (a key and its 100 ids)", n)
	}
	later := now.Add(window + time.Second)
	if err := c.Add("k", "id-new", later, later); err != nil {
		t.Fatal(err)
	}
	if n := c.Len(); n != 2 {
		t.Errorf("Len past the window = %d, want 2 (the key and its new id)", n)
	}
}

// BenchmarkReplayCacheFull reports what a full cache of the default cap holds in the heap.
func BenchmarkReplayCacheFull(b *testing.B) {
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := dpop.NewReplayCache(window, dpop.ReplayOptions{})
		for k := 0; c.Len() < 1<<16-64; k++ {
			for i := range 64 {
				// 43-character thumbprints and 64-character ids: the largest a proof sends.
				_ = c.Add(fmt.Sprintf("%043d", k), fmt.Sprintf("%064d", i), now, now)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB/full-cache")
		runtime.KeepAlive(c)
	}
}
