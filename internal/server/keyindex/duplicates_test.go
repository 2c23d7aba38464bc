package keyindex

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// A model of what the hash Secrets say, against which the index is checked after every change:
// for each key, the UIDs whose hash Secret holds its hash (as current, or as previous within
// its grace period).
type model struct {
	holds map[types.UID][2]int // uid → indexes into keys of current and previous (-1: none)
}

const (
	modelUIDs = 4
	modelKeys = 5
)

// apply runs one operation, coded in op, on both the index and the model.
func (m *model) apply(t *testing.T, x *Index, keys []string, op byte, arg byte) {
	t.Helper()
	uid := types.UID(fmt.Sprintf("u%d", int(op)%modelUIDs))
	switch (op / modelUIDs) % 4 {
	case 0, 1: // set current (and maybe previous)
		cur, prev := int(arg)%modelKeys, int(arg/modelKeys)%(modelKeys+1)-1
		prevKey := ""
		if prev >= 0 {
			prevKey = keys[prev]
		}
		err := putHashSecret(x, hashSecret(uid, keys[cur], prevKey, now.Add(time.Hour)))
		var dup *DuplicateError
		if err != nil && !errors.As(err, &dup) {
			t.Fatalf("putHashSecret: %v", err)
		}
		if prev == cur {
			prev = -1 // the same key twice is one hash
		}
		m.holds[uid] = [2]int{cur, prev}
	case 2: // delete
		x.DeleteHashSecret(keysecret.HashName(uid))
		delete(m.holds, uid)
	case 3: // replace with a Secret that breaks the contract: it contributes nothing
		s := hashSecret(uid, keys[int(arg)%modelKeys], "", time.Time{})
		s.Type = corev1.SecretTypeOpaque
		if err := putHashSecret(x, s); err == nil {
			t.Fatal("a broken hash Secret was accepted")
		}
		delete(m.holds, uid)
	}
}

// check compares every key's lookup with the model: no holder is Unknown, one holder is that
// APIKey and no other, several holders is Duplicate (fail closed).
func (m *model) check(t *testing.T, x *Index, keys []string, step int) {
	t.Helper()
	duplicates := 0
	for i, key := range keys {
		var holders []types.UID
		for uid, h := range m.holds {
			if h[0] == i || h[1] == i {
				holders = append(holders, uid)
			}
		}
		sum := apikey.Sum(key)
		k, r := x.Lookup(&sum, now)
		switch {
		case len(holders) == 0 && r != Unknown:
			t.Fatalf("step %d: key %d is held by no Secret but looks up as %v", step, i, r)
		case len(holders) == 1 && (r != OK || k.UID != holders[0]):
			t.Fatalf("step %d: key %d is held by %s alone but looks up as %v (%v)", step, i, holders[0], r, k)
		case len(holders) > 1:
			duplicates++
			if r != Duplicate || k != nil {
				t.Fatalf("step %d: key %d is held by %v but looks up as %v (%v): one hash mapped to a key", step, i, holders, r, k)
			}
		}
	}
	if got := x.Stats().DuplicateHashes; got != duplicates {
		t.Fatalf("step %d: Stats counts %d duplicate hashes, the model %d", step, got, duplicates)
	}
}

func checkOps(t *testing.T, ops []byte) {
	keys := make([]string, modelKeys)
	for i := range keys {
		keys[i] = mustKey(t)
	}
	x := New()
	for i := range modelUIDs {
		if err := putAPIKey(x, apiKey(types.UID(fmt.Sprintf("u%d", i)), nil)); err != nil {
			t.Fatal(err)
		}
	}
	m := &model{holds: map[types.UID][2]int{}}
	for i := 0; i+1 < len(ops); i += 2 {
		m.apply(t, x, keys, ops[i], ops[i+1])
		m.check(t, x, keys, i/2)
	}
	// Removing every Secret leaves nothing behind.
	for i := range modelUIDs {
		x.DeleteHashSecret(keysecret.HashName(types.UID(fmt.Sprintf("u%d", i))))
	}
	if s := x.Stats(); s.Hashes != 0 || s.DuplicateHashes != 0 {
		t.Fatalf("after deleting every Secret: %+v", s)
	}
}

// TestDuplicateHashesFailClosed is a property test: through random sequences of hash Secrets
// added, changed, broken and deleted, a hash held by one Secret authenticates exactly its
// APIKey, and a hash held by several authenticates nobody, until only one holds it again.
func TestDuplicateHashesFailClosed(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	for range 200 {
		ops := make([]byte, 2*(1+rng.IntN(40)))
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		checkOps(t, ops)
	}
}

// FuzzDuplicateHashes runs the same property on operation sequences the fuzzer chooses
// (go test -fuzz FuzzDuplicateHashes ./internal/server/keyindex/).
func FuzzDuplicateHashes(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 4, 0})            // two APIKeys' Secrets hold key 0, then one is replaced
	f.Add([]byte{0, 6, 1, 1, 2, 0, 9, 0})      // current and previous shared, then deleted
	f.Add([]byte{0, 0, 1, 0, 2, 0, 12, 0, 13}) // duplicates, then broken Secrets
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		checkOps(t, ops)
	})
}
