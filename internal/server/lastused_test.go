//go:build !unit

package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestLastUsedWritesOverBudget: against a real API server, 12 keys in use and a budget of 2
// writes a flush: every key's lastUsedAt is written, each once, in budget-sized flushes, and
// the backlog gauge shows the wait.
func TestLastUsedWritesOverBudget(t *testing.T) {
	ns := env.Namespace(t, "budget")
	var keys []*keyFixture
	for i := range 12 {
		keys = append(keys, newKey(t, ns, fmt.Sprintf("key-%02d", i), switchboardv1alpha1.APIKeySpec{}))
	}
	okBefore := metricValue(t, "switchboard_api_last_used_writes_total", "result", "ok")
	s := startServer(t, nil, Options{LastUsedFlush: 500 * time.Millisecond, LastUsedWriteRate: 4}, true)
	for _, k := range keys {
		if resp := s.get(t, "/v1/connections", k.Key); resp.Status != 200 {
			t.Fatalf("status %d", resp.Status)
		}
	}
	maxBacklog := 0.0
	eventually(t, "every key's lastUsedAt", func() bool {
		maxBacklog = max(maxBacklog, metricValue(t, "switchboard_api_last_used_backlog"))
		for _, k := range keys {
			var ak switchboardv1alpha1.APIKey
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(k.APIKey), &ak); err != nil {
				t.Fatal(err)
			}
			if ak.Status.LastUsedAt == nil {
				return false
			}
		}
		return true
	})
	if got := metricValue(t, "switchboard_api_last_used_writes_total", "result", "ok") - okBefore; got != 12 {
		t.Errorf("%v lastUsedAt writes, want one per key (12)", got)
	}
	if maxBacklog == 0 {
		t.Error("the backlog gauge never showed the keys waiting for the budget")
	}
}
