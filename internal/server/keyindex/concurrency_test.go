package keyindex

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestConcurrentReadsAndUpdates: readers never see a torn state while informer events change
// the index (run with -race to check the locking as well).
func TestConcurrentReadsAndUpdates(t *testing.T) {
	x := New()
	key := mustKey(t)
	if err := putAPIKey(x, apiKey("u1", nil)); err != nil {
		t.Fatal(err)
	}
	if err := putHashSecret(x, hashSecret("u1", key, "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("c%d", i%50)
			if i%3 == 0 {
				x.DeleteConnection("tenant", name)
			} else {
				x.SetConnection("tenant", conn(name, fmt.Sprintf("conn_%d", i%97)))
			}
			if err := putAPIKey(x, apiKey(types.UID("u1"), nil)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 2000 {
		h := sumOf(key)
		if k, r := x.Lookup(&h, now); r != OK || k.UID != "u1" {
			t.Fatalf("Lookup = %v during updates", r)
		}
		items := x.Connections("tenant").Items()
		for i := 1; i < len(items); i++ {
			if !items[i-1].Less(items[i].ID, items[i].Name) {
				t.Fatalf("a torn snapshot: %s before %s", items[i-1].ID, items[i].ID)
			}
		}
	}
	close(stop)
	wg.Wait()
}
