//go:build !unit

package fault

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// memSample is memory of the server as the kernel and the Go runtime count it.
type memSample struct {
	cgroup int64 // memory.usage_in_bytes of its cgroup
	rss    int64 // VmRSS
	heap   int64 // go_memstats_heap_inuse_bytes
	tcp    int64 // memory.kmem.tcp.usage_in_bytes of its cgroup: its sockets' buffers in the kernel
}

func (s memSample) String() string {
	return fmt.Sprintf("cgroup %.1f MiB, RSS %.1f MiB, Go heap in use %.1f MiB, socket buffers %.1f MiB", mib(s.cgroup), mib(s.rss), mib(s.heap), mib(s.tcp))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// memoryWatch samples a process's memory every 100 ms (its heap from its metrics) and keeps
// the peaks.
type memoryWatch struct {
	mu     sync.Mutex
	peak   memSample
	cancel context.CancelFunc
	done   chan struct{}
}

func watchMemory(ctx context.Context, pid int, cg *memCgroup, metricsURL string) *memoryWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &memoryWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			s := memSample{cgroup: readInt(filepath.Join(cg.dir, "memory.usage_in_bytes")), rss: procStatus(pid, "VmRSS"),
				tcp: readInt(filepath.Join(cg.dir, "memory.kmem.tcp.usage_in_bytes"))}
			s.heap = scrapeMetric(ctx, metricsURL, "go_memstats_heap_inuse_bytes")
			w.mu.Lock()
			w.peak = memSample{cgroup: max(w.peak.cgroup, s.cgroup), rss: max(w.peak.rss, s.rss), heap: max(w.peak.heap, s.heap), tcp: max(w.peak.tcp, s.tcp)}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// snapshot returns the peaks since the last snapshot and starts afresh.
func (w *memoryWatch) snapshot() memSample {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.peak
	w.peak = memSample{}
	return p
}

func (w *memoryWatch) stop() {
	w.cancel()
	<-w.done
}

func readInt(path string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	return n
}

// bystanderWatch asks the server with a key every 100 ms and counts the answers by status
// ("error: …" when there was none).
type bystanderWatch struct {
	mu      sync.Mutex
	answers map[string]int
	cancel  context.CancelFunc
	done    chan struct{}
}

func watchBystander(ctx context.Context, base, key string) *bystanderWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &bystanderWatch{answers: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			outcome := ""
			if r, err := call(base+"/v1/connections", "Bearer "+key); err != nil {
				outcome = "error: " + err.Error()
			} else {
				outcome = strconv.Itoa(r.status)
			}
			w.mu.Lock()
			w.answers[outcome]++
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the watch and returns the answers counted.
func (w *bystanderWatch) stop() map[string]int {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.answers
}
