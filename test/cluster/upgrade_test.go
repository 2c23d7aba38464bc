//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// load is clients calling the API continuously with a valid key through the Service, as an
// application would during an upgrade: keep-alive connections, Go's standard client.
type load struct {
	mu          sync.Mutex
	requests    int
	failures    []string  // what each failed request got
	lastSuccess time.Time // when the latest successful response arrived
	longestGap  time.Duration
	slowest     time.Duration
	stop        context.CancelFunc
	wg          sync.WaitGroup
}

func startLoad(c *http.Client, api, key string, workers int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{stop: cancel, lastSuccess: time.Now()}
	for range workers {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				r := listConnections(ctx, c, api, key)
				if ctx.Err() != nil {
					return // the run ended during this request: not the server's doing
				}
				l.record(r, time.Since(start))
			}
		})
	}
	return l
}

func (l *load) record(r apiResponse, took time.Duration) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	l.slowest = max(l.slowest, took)
	if r.err != nil || r.status != http.StatusOK {
		l.failures = append(l.failures, fmt.Sprintf("%s: %s", now.Format("15:04:05.000"), r))
		return
	}
	l.longestGap = max(l.longestGap, now.Sub(l.lastSuccess))
	l.lastSuccess = now
}

func (l *load) finish() {
	l.stop()
	l.wg.Wait()
}

// testUpgrade rolls every pod with `helm upgrade` to a new image tag while four clients call
// the API without pause: readiness gating, the server's shutdown delay and the rollout
// strategy must make that invisible to them.
func testUpgrade(t *testing.T) {
	s.tenant(t, "tenant-c", "load")
	key := s.claim(t, "tenant-c", "load")
	s.issued = append(s.issued, key)
	s.saveLogs(t)

	// The new version: the same image under another tag, so that every pod template changes.
	newTag := s.tag + "-upgrade"
	if _, err := s.c.Ctr("images", "tag", s.repo+":"+s.tag, s.repo+":"+newTag); err != nil {
		t.Fatal(err)
	}
	var before []string
	for _, p := range s.pods(t, "server") {
		before = append(before, p.Name)
	}

	l := startLoad(s.c.HTTPClient(), s.serviceURL(t, "switchboard-api"), key, 4)
	defer l.finish()
	time.Sleep(3 * time.Second)
	start := time.Now()
	args := append([]string{"upgrade", release, filepath.Join(s.root, "charts", "switchboard"), "--reuse-values"}, s.helmInstallArgs(newTag)...)
	s.must(t, "", s.helm, args...)
	s.readyDeployment(t, "switchboard-server", 3*time.Minute)
	s.readyDeployment(t, "switchboard-operator", 3*time.Minute)
	s.readyDeployment(t, "switchboard-panel", 3*time.Minute)
	rolled := time.Since(start)
	eventually(t, 2*time.Minute, "only new server pods", func() error {
		pods := s.pods(t, "server")
		for _, p := range pods {
			if slices.Contains(before, p.Name) || p.Spec.Containers[0].Image != s.repo+":"+newTag {
				return fmt.Errorf("pod %s (%s) is still there", p.Name, p.Spec.Containers[0].Image)
			}
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d server pods, want 2", len(pods))
		}
		return nil
	})
	time.Sleep(5 * time.Second)
	l.finish()

	t.Logf("upgrade: rolled in %s; %d requests, %d failed, longest gap between successes %s, slowest request %s",
		rolled.Round(100*time.Millisecond), l.requests, len(l.failures), l.longestGap.Round(time.Millisecond), l.slowest.Round(time.Millisecond))
	if l.requests < 100 {
		t.Fatalf("only %d requests were sent during the upgrade; the load did not run", l.requests)
	}
	if len(l.failures) > 0 {
		t.Errorf("%d of %d requests failed during the rolling upgrade, want none; the first: %v",
			len(l.failures), l.requests, l.failures[:min(len(l.failures), 10)])
	}
}
