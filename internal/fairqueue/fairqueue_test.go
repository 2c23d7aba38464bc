package fairqueue

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// req is the request for "namespace/name", or for a cluster-scoped "name".
func req(s string) reconcile.Request {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		ns, name = "", s
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// TestQueueOrder: namespaces take turns, each namespace's requests in the order they came.
func TestQueueOrder(t *testing.T) {
	tests := []struct {
		name string
		// ops are pushes ("ns/name") and pops ("-").
		ops  []string
		want []string // what the pops return, in order
	}{
		{name: "one namespace is FIFO", ops: []string{"a/1", "a/2", "a/3", "-", "-", "-"}, want: []string{"a/1", "a/2", "a/3"}},
		{
			name: "a flood does not hold back another namespace",
			ops:  []string{"a/1", "a/2", "a/3", "a/4", "b/1", "-", "-", "-", "-", "-"},
			want: []string{"a/1", "b/1", "a/2", "a/3", "a/4"},
		},
		{
			name: "three namespaces in rotation",
			ops:  []string{"a/1", "a/2", "b/1", "b/2", "c/1", "-", "-", "-", "-", "-"},
			want: []string{"a/1", "b/1", "c/1", "a/2", "b/2"},
		},
		{
			name: "a namespace that empties leaves the rotation and rejoins at its end",
			ops:  []string{"a/1", "b/1", "b/2", "-", "-", "a/2", "-", "-"},
			want: []string{"a/1", "b/1", "b/2", "a/2"},
		},
		{
			name: "cluster-scoped requests are one more namespace",
			ops:  []string{"a/1", "a/2", "x", "-", "-", "-"},
			want: []string{"a/1", "x", "a/2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := New()
			var got []string
			for _, op := range tt.ops {
				if op == "-" {
					r := q.Pop()
					s := r.Name
					if r.Namespace != "" {
						s = r.Namespace + "/" + r.Name
					}
					got = append(got, s)
					continue
				}
				q.Push(req(op))
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("popped %v, want %v", got, tt.want)
			}
			if q.Len() != 0 || len(q.pending) != 0 || len(q.turns) != 0 {
				t.Fatalf("left behind: len %d, pending %v, turns %v", q.Len(), q.pending, q.turns)
			}
		})
	}
}

// TestRateLimitingQueue: in client-go's work queue, a request added again while it waits keeps
// its one place, and namespaces still take turns.
func TestRateLimitingQueue(t *testing.T) {
	q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	for _, s := range []string{"a/1", "a/2", "a/1", "a/3", "a/2", "b/1"} {
		q.Add(req(s))
	}
	if q.Len() != 4 {
		t.Fatalf("Len %d, want 4 distinct requests", q.Len())
	}
	var got []string
	for range 4 {
		r, _ := q.Get()
		got = append(got, r.Namespace+"/"+r.Name)
		q.Done(r)
	}
	if want := []string{"a/1", "b/1", "a/2", "a/3"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestDelayedRequestsTakeTurns: requests added with a delay, as a reconcile's RequeueAfter
// schedules every APIKey's renewal, wait in the fair rotation once the delay is over: a
// namespace whose many keys fall due at once has one of them reconciled before another
// namespace's key that fell due with them, not all of them (issue 29).
func TestDelayedRequestsTakeTurns(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	q := newRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](), clk)
	defer q.ShutDown()
	for i := range 50 {
		q.AddAfter(req(fmt.Sprintf("storm/%d", i)), time.Minute)
	}
	q.AddAfter(req("quiet/1"), time.Minute)
	if q.Len() != 0 {
		t.Fatalf("%d requests ready before their delay", q.Len())
	}
	// The delaying queue's goroutine moves them once it sees the fake clock's timer fire.
	deadline := time.Now().Add(30 * time.Second)
	for q.Len() < 51 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 51 requests ready a minute (of the fake clock) later", q.Len())
		}
		clk.Step(time.Minute)
		time.Sleep(10 * time.Millisecond)
	}
	var got []string
	for range 3 {
		r, _ := q.Get()
		got = append(got, r.Namespace)
		q.Done(r)
	}
	if !slices.Contains(got[:2], "quiet") {
		t.Fatalf("the first requests were from %v: the quiet namespace waited behind the storm", got)
	}
}
