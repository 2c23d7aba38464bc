// Package fairqueue orders a controller's work queue fairly between namespaces, so that one
// tenant that makes its objects change all the time cannot keep another tenant's object waiting
// behind its own: each namespace with work waiting gets its turn, in rotation.
//
// It plugs into client-go's workqueue as the storage of the queue (workqueue.Queue), so the
// workqueue keeps doing everything else: de-duplication, the processing set, delays and rate
// limits. A namespace with one item waits behind at most one item of every other namespace.
// ControllerOptions gives a controller-runtime controller such a queue: every controller of the
// operator and of the webhook sender has one.
package fairqueue

import (
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue is a workqueue.Queue of reconcile requests that takes namespaces in turn, each
// namespace's requests in the order they came. Its methods are called by the workqueue under its
// own lock, one at a time.
type Queue struct {
	// pending holds each namespace's requests, oldest first; a namespace is a key only while it
	// has some.
	pending map[string][]reconcile.Request
	// turns is the rotation of namespaces with requests pending: the next Pop takes from
	// turns[0]. Each namespace appears in it once.
	turns []string
	n     int
}

var _ workqueue.Queue[reconcile.Request] = (*Queue)(nil)

// New returns an empty Queue.
func New() *Queue { return &Queue{pending: map[string][]reconcile.Request{}} }

// Touch is called when an item already waiting is added again: it keeps its place.
func (q *Queue) Touch(reconcile.Request) {}

// Push adds a request at the end of its namespace's line; a namespace that had nothing waiting
// joins the rotation at its end.
func (q *Queue) Push(item reconcile.Request) {
	ns := item.Namespace
	if len(q.pending[ns]) == 0 {
		q.turns = append(q.turns, ns)
	}
	q.pending[ns] = append(q.pending[ns], item)
	q.n++
}

// Len is the number of requests waiting.
func (q *Queue) Len() int { return q.n }

// Pop takes the oldest request of the namespace whose turn it is; that namespace goes to the end
// of the rotation if it has more. The workqueue never calls Pop on an empty queue.
func (q *Queue) Pop() reconcile.Request {
	ns := q.turns[0]
	q.turns[0] = ""
	q.turns = q.turns[1:]
	line := q.pending[ns]
	item := line[0]
	line[0] = reconcile.Request{}
	if line = line[1:]; len(line) == 0 {
		delete(q.pending, ns)
	} else {
		q.pending[ns] = line
		q.turns = append(q.turns, ns)
	}
	q.n--
	return item
}

// NewRateLimitingQueue is a controller's queue (controller.Options.NewQueue) whose storage is a
// Queue: client-go's rate-limiting, delaying work queue, fair between namespaces. A request
// added with a delay (a reconcile's RequeueAfter: an APIKey's renewal time) takes its turn like
// any other once the delay is over.
func NewRateLimitingQueue(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return newRateLimitingQueue(name, rateLimiter, clock.RealClock{})
}

// newRateLimitingQueue is NewRateLimitingQueue on clk, whose time the delays count.
func newRateLimitingQueue(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request], clk clock.WithTicker) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Name: name, Queue: New(), Clock: clk})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{Name: name, Queue: base, Clock: clk})
	return workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, DelayingQueue: delaying, Clock: clk})
}

// ControllerOptions returns opts with a work queue that is fair between namespaces, unless the
// caller chose a queue.
func ControllerOptions(opts controller.Options) controller.Options {
	if opts.NewQueue == nil {
		opts.NewQueue = NewRateLimitingQueue
	}
	return opts
}
