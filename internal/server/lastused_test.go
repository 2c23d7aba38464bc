//go:build !unit

package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/testenv/fixture"
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
	s := startServer(t, nil, &sc{LastUsed: configv1alpha1.LastUsed{WritesPerSecond: ptr.To(4.0)}}, Deps{LastUsedFlush: 500 * time.Millisecond}, true)
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

// TestPreviousKeyUseRecorded: against a real API server, during a rotation's grace a request
// with the old key records status.previousKeyUse (generation 1, the old key's) in the same
// write as lastUsedAt; requests with the new key then move lastUsedAt and leave it alone.
func TestPreviousKeyUseRecorded(t *testing.T) {
	ns := env.Namespace(t, "previous-use")
	k := newKey(t, ns, "rotated", switchboardv1alpha1.APIKeySpec{})
	old := k.Key
	current, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	rotated := fixture.HashSecret(systemNamespace, k.APIKey, current, old, time.Now().Add(time.Hour))
	rotated.ResourceVersion = k.Secret.ResourceVersion
	if err := env.Client.Update(ctx(t), rotated); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, nil, &sc{LastUsed: configv1alpha1.LastUsed{Interval: &metav1.Duration{Duration: time.Second}}}, Deps{LastUsedFlush: 200 * time.Millisecond}, true)
	var ak switchboardv1alpha1.APIKey
	read := func() *switchboardv1alpha1.APIKey {
		if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(k.APIKey), &ak); err != nil {
			t.Fatal(err)
		}
		return &ak
	}
	eventually(t, "the old key to work within its grace", func() bool { return s.get(t, "/v1/connections", old).Status == 200 })
	eventually(t, "status.previousKeyUse of generation 1", func() bool {
		p := read().Status.PreviousKeyUse
		return p != nil && p.KeyGeneration == 1 && ak.Status.LastUsedAt != nil && !ak.Status.LastUsedAt.Before(&p.LastUsedAt)
	})
	recorded := ak.Status.PreviousKeyUse.DeepCopy()
	lastUsed := ak.Status.LastUsedAt.Time
	time.Sleep(1100 * time.Millisecond) // the next second, so that a new use is a new value
	if resp := s.get(t, "/v1/connections", current); resp.Status != 200 {
		t.Fatalf("the new key: status %d", resp.Status)
	}
	eventually(t, "lastUsedAt to move with the new key", func() bool { return read().Status.LastUsedAt.After(lastUsed) })
	if got := ak.Status.PreviousKeyUse; got == nil || *got != *recorded {
		t.Errorf("status.previousKeyUse = %+v after a use of the new key only, want it unchanged (%+v)", got, recorded)
	}
}
