package satoken

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func sumOf(i int) *[sha256.Size]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i)) //nolint:gosec // i is not negative
	s := sha256.Sum256(b[:])
	return &s
}

// Entries leave in the order they came, and a token dropped (expired, pod gone) then cached
// again in another slot is not evicted when its old slot comes round.
func TestCacheEvictsFirstInFirstOut(t *testing.T) {
	c := newCache(3)
	now := time.Unix(1_000_000, 0)
	e := entry{expires: now.Add(time.Hour), until: now.Add(time.Hour)}
	for i := range 3 {
		c.put(sumOf(i), e)
	}
	c.drop(sumOf(1))
	c.put(sumOf(1), e) // the next slot, 0's: 0 goes
	c.put(sumOf(3), e) // slot 1, which 1 held before: 1 lives elsewhere now and stays
	for i, want := range []bool{false, true, true, true} {
		if _, found, _ := c.get(sumOf(i), now); found != want {
			t.Errorf("token %d cached: %v; want %v", i, found, want)
		}
	}
	c.put(sumOf(4), e) // slot 2: 2 goes
	c.put(sumOf(5), e) // slot 0: 1 goes
	for i, want := range []bool{false, false, false, true, true, true} {
		if _, found, _ := c.get(sumOf(i), now); found != want {
			t.Errorf("after two more, token %d cached: %v; want %v", i, found, want)
		}
	}
	if n := c.len(); n != 3 {
		t.Errorf("%d entries; want 3", n)
	}
}

// TestCacheMemory measures a full cache of DefaultMaxCached tokens of typical workloads.
func TestCacheMemory(t *testing.T) {
	before := heapInUse()
	c := newCache(DefaultMaxCached)
	now := time.Unix(1_000_000, 0)
	for i := range DefaultMaxCached {
		w := Workload{Namespace: "team-a", ServiceAccount: "api", ServiceAccountUID: types.UID(fmt.Sprintf("4f9d3f95-77d1-435f-bd61-%012d", i%100)),
			Pod: fmt.Sprintf("api-7d9f8c6b5-%05d", i), PodUID: types.UID(fmt.Sprintf("08b37af3-3473-4e79-a013-%012d", i)),
			Node: fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/256%256, i%256)}
		// Strings decoded from each token's JSON are the entry's own, as in Verify.
		w.Namespace, w.ServiceAccount = string([]byte(w.Namespace)), string([]byte(w.ServiceAccount))
		c.put(sumOf(i), entry{workload: w, expires: now.Add(time.Hour), until: now.Add(time.Hour)})
	}
	after := heapInUse()
	perEntry := (after - before) / DefaultMaxCached
	t.Logf("a full cache of %d tokens: %.1f MiB, %d bytes per token", DefaultMaxCached, float64(after-before)/(1<<20), perEntry)
	if perEntry > 1024 {
		t.Errorf("%d bytes per cached token; want at most 1 KiB", perEntry)
	}
	runtime.KeepAlive(c)
}
