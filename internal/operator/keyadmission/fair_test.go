//go:build !unit

package keyadmission_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tenant is a client of namespace ns as a tenant's ServiceAccount allowed to write APIKeys
// there, unthrottled by client-go: the API server's own fairness (its priority and fairness
// tells two tenants' requests apart) is what it meets, as any tenant's.
func tenant(t *testing.T, ns string) client.Client {
	t.Helper()
	cfg := sys.ServiceAccount(t, ns, "tenant", rbacv1.PolicyRule{
		APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys"}, Verbs: []string{"create", "update", "patch"}})
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: sys.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWebhookFairBetweenNamespaces (issue 39): one tenant floods the webhook with parallel
// `--dry-run=server` writes of the costliest cron windows there are (issue 29's, a window every
// two minutes: 50,000 calendar lookups each); another tenant's cron-window write, in its own
// namespace, is answered within 2 s at every sample all along, where it waited behind every
// check of the flood (several seconds; past the API server's 10 s timeout, a refusal, at a
// larger flood). The flood's own excess is refused at once, saying why.
func TestWebhookFairBetweenNamespaces(t *testing.T) {
	const (
		flooders = 96
		flood    = 12 * time.Second
		every    = 250 * time.Millisecond
		bound    = 2 * time.Second
	)
	floodNS, fairNS := sys.Namespace(t, "flood"), sys.Namespace(t, "fair")
	waitForWebhook(t, fairNS)
	at(t, wednesday)
	attacker, victim := tenant(t, floodNS), tenant(t, fairNS)
	costly := key(floodNS, "costly", time.Hour, cronWindow("*/2 * * * *", time.Minute, "Europe/Paris"))
	ordinary := key(fairNS, "ordinary", 24*time.Hour, cronWindow("0 0 * * *", time.Minute, "UTC"))
	if err := attacker.Create(testContext(t), costly.DeepCopy(), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "open too often to be checked") {
		t.Fatalf("the costly windows alone: %v, want the refusal of windows that open too often", err)
	}

	// The flood runs until the sampling ends; each write is let finish, so that none is cut.
	ctx, stop := context.WithTimeout(context.Background(), flood)
	defer stop()
	var checked, busy, other atomic.Int64
	var lastOther atomic.Value
	var wg sync.WaitGroup
	for range flooders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := attacker.Create(testContext(t), costly.DeepCopy(), client.DryRunAll)
				switch {
				case err != nil && strings.Contains(err.Error(), "open too often to be checked"):
					checked.Add(1)
				case err != nil && strings.Contains(err.Error(), "too many renewal-window checks in progress for namespace "+floodNS+"; retry"):
					busy.Add(1)
				default:
					other.Add(1)
					lastOther.Store(fmt.Sprint(err))
				}
			}
		}()
	}

	var worst time.Duration
	samples, late := 0, 0
	tick := time.NewTicker(every)
	defer tick.Stop()
	// The flood's first checks are under way before the first sample.
	time.Sleep(time.Second)
	for ctx.Err() == nil {
		start := time.Now()
		err := victim.Create(testContext(t), ordinary.DeepCopy(), client.DryRunAll)
		took := time.Since(start)
		samples++
		worst = max(worst, took)
		if err != nil || took > bound {
			late++
			t.Errorf("sample %d: answered in %s: %v", samples, took.Round(time.Millisecond), err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	wg.Wait()
	t.Logf("%d samples of another namespace's write, the slowest answered in %s; the flood of %d writers: %d checked, %d refused at once (its namespace busy), %d otherwise (%v)",
		samples, worst.Round(time.Millisecond), flooders, checked.Load(), busy.Load(), other.Load(), lastOther.Load())
	if samples < 8 || late > 0 {
		t.Fatalf("%d of %d samples late or refused", late, samples)
	}
	if checked.Load() == 0 || busy.Load() == 0 {
		t.Fatal("the flood was not both checked and refused at once: it did not flood")
	}
}
