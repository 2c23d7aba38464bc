package testenv

import (
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Logger returns a logger that writes to t's log until t's clean-up starts, and drops lines
// after that. controller-runtime's manager logs from a goroutine it does not wait for
// ("Stopping and waiting for warmup runnables"), and testing panics on a t.Log after the test
// has completed; a plain testr logger therefore fails a test at random.
func Logger(t testing.TB) logr.Logger {
	var mu sync.RWMutex
	done := false
	t.Cleanup(func() {
		mu.Lock()
		done = true
		mu.Unlock()
	})
	return funcr.New(func(prefix, args string) {
		mu.RLock()
		defer mu.RUnlock()
		if done {
			return
		}
		if prefix != "" {
			t.Log(prefix, args)
			return
		}
		t.Log(args)
	}, funcr.Options{})
}
