// Package podwatch wakes the operator when the pods of a namespace change, for the namespaces
// whose APIKeys wait for their consumers to restart (spec.graceEndsWhenUnusedFor) or bind
// them (spec.binding.consumers: a consumer's pod started or gone changes the binding): one
// metadata-only watch of pods per such namespace, started when the first key there asks and
// stopped when the last one no longer does. It keeps nothing of a pod but its name, and decides
// nothing: each change only names the keys to look again, which read the pods from the API
// server themselves.
//
// It holds no grant of its own: the watch runs with the rights the tenant bound in its
// namespace (the switchboard-consumer-reader ClusterRole). A namespace that does not let it
// watch is not retried for RetryForbidden, and its keys look again on their own schedule.
package podwatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/switchboard-dev/switchboard/internal/metrics"
)

const (
	// DefaultMaxNamespaces bounds the namespaces watched at once; keys of others poll.
	DefaultMaxNamespaces = 256
	// RetryForbidden is how long a namespace whose pods switchboard may not watch is left
	// unwatched before a key there asks again.
	RetryForbidden = 5 * time.Minute
)

var pods = corev1.SchemeGroupVersion.WithResource("pods")

// The watch's metrics, on controller-runtime's registry (served with the operator's own).
var (
	metricWatches = metrics.Registered.NewGauge(prometheus.GaugeOpts{Name: "switchboard_operator_pod_watches", Help: "Namespaces whose pods the operator watches now, because keys there wait for their consumers to restart."})
	metricWakeups = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_operator_pod_watch_wakeups_total", Help: "Keys woken by a change of the pods they wait on."})
	metricRefused = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_operator_pod_watches_refused_total", Help: "Pod watches a namespace refused (its switchboard-consumer-reader binding lacks watch); its keys look again every 30 s."})
)

// Watcher watches the pods of the namespaces its keys wait on. Add it to the manager (it runs
// on the leader only) and feed Events to the controller of those keys.
type Watcher struct {
	client        metadata.Interface
	maxNamespaces int
	clock         clock.PassiveClock
	log           logr.Logger
	// events carries, to the controller, one object per key to look at again.
	events chan event.GenericEvent
	// changed carries the namespaces whose pods changed, each at most once until dispatched:
	// however fast a tenant's pods churn, the memory this takes is one entry per namespace.
	changed chan string

	// changes counts the pod changes the watches saw.
	changes atomic.Uint64

	mu        sync.Mutex
	ctx       context.Context // the manager's, once started
	watches   map[string]*namespaceWatch
	forbidden map[string]time.Time // namespace: when its watch was refused
}

type namespaceWatch struct {
	keys    map[string]bool // the names of the APIKeys that wait on its pods
	pending bool            // a change is queued on changed
	stop    context.CancelFunc
}

// New returns a Watcher of at most maxNamespaces namespaces (DefaultMaxNamespaces when 0).
func New(c metadata.Interface, maxNamespaces int, clk clock.PassiveClock, log logr.Logger) *Watcher {
	if maxNamespaces <= 0 {
		maxNamespaces = DefaultMaxNamespaces
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Watcher{
		client: c, maxNamespaces: maxNamespaces, clock: clk, log: log,
		events:  make(chan event.GenericEvent, 16),
		changed: make(chan string, maxNamespaces),
		watches: map[string]*namespaceWatch{}, forbidden: map[string]time.Time{},
	}
}

// Events is the channel of the keys to look at again (source.Channel).
func (w *Watcher) Events() <-chan event.GenericEvent { return w.events }

// NeedLeaderElection is true: only the leader reconciles keys, so only it watches.
func (w *Watcher) NeedLeaderElection() bool { return true }

// Start dispatches the changes until ctx ends, then stops every watch.
func (w *Watcher) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for ns, nw := range w.watches {
			w.drop(ns, nw)
		}
		w.ctx = nil
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ns := <-w.changed:
			for _, name := range w.take(ns) {
				key := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
				select {
				case w.events <- event.GenericEvent{Object: key}:
					metricWakeups.Inc()
				case <-ctx.Done():
					return nil
				}
			}
		}
	}
}

// take clears the pending change of ns and returns the keys that wait on it.
func (w *Watcher) take(ns string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	nw := w.watches[ns]
	if nw == nil {
		return nil
	}
	nw.pending = false
	names := make([]string, 0, len(nw.keys))
	for name := range nw.keys {
		names = append(names, name)
	}
	return names
}

// Want says key waits on the pods of its namespace, and reports whether they are watched: false
// when the Watcher is not running, watches as many namespaces as it may, or was refused the
// watch there (the caller then looks again on its own). Safe on a nil Watcher.
func (w *Watcher) Want(key types.NamespacedName) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil || w.ctx.Err() != nil {
		return false
	}
	ns := key.Namespace
	if nw := w.watches[ns]; nw != nil {
		nw.keys[key.Name] = true
		return true
	}
	if at, refused := w.forbidden[ns]; refused {
		if w.clock.Since(at) < RetryForbidden {
			return false
		}
		delete(w.forbidden, ns)
	}
	if len(w.watches) >= w.maxNamespaces {
		return false
	}
	ctx, stop := context.WithCancel(w.ctx)
	nw := &namespaceWatch{keys: map[string]bool{key.Name: true}, stop: stop}
	w.watches[ns] = nw
	if err := w.run(ctx, ns, nw); err != nil {
		stop()
		delete(w.watches, ns)
		w.log.Error(err, "could not watch the pods of a namespace; its keys look again on their own", "namespace", ns)
		return false
	}
	metricWatches.Inc()
	return true
}

// Release says key no longer waits on pods; the namespace's watch stops with its last key.
// Safe on a nil Watcher.
func (w *Watcher) Release(key types.NamespacedName) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	nw := w.watches[key.Namespace]
	if nw == nil || !nw.keys[key.Name] {
		return
	}
	delete(nw.keys, key.Name)
	if len(nw.keys) == 0 {
		w.drop(key.Namespace, nw)
	}
}

// drop stops the watch nw of ns; w.mu is held.
func (w *Watcher) drop(ns string, nw *namespaceWatch) {
	nw.stop()
	delete(w.watches, ns)
	metricWatches.Dec()
}

// Watching reports the namespaces watched now, for tests and metrics.
func (w *Watcher) Watching() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.watches))
	for ns := range w.watches {
		out = append(out, ns)
	}
	return out
}

// run starts the watch of ns's pods as metadata, keeping only their names.
func (w *Watcher) run(ctx context.Context, ns string, nw *namespaceWatch) error {
	inf := metadatainformer.NewFilteredMetadataInformer(w.client, pods, ns, 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(keepName); err != nil {
		return err
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			w.refused(ns, nw)
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return err
	}
	notify := func(any) { w.notify(ns, nw) }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify,
		// A pod's status changes often and says nothing here: only the start of its deletion.
		UpdateFunc: func(old, obj any) {
			if deleting(old) != deleting(obj) {
				notify(obj)
			}
		},
		DeleteFunc: notify,
	}); err != nil {
		return err
	}
	go inf.RunWithContext(ctx)
	return nil
}

// refused stops the watch of ns, which the tenant did not let switchboard make, and remembers it.
func (w *Watcher) refused(ns string, nw *namespaceWatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watches[ns] != nw {
		return
	}
	w.drop(ns, nw)
	metricRefused.Inc()
	// Refusals older than RetryForbidden are asked again anyway: the map keeps only the
	// namespaces refused lately.
	for other, at := range w.forbidden {
		if w.clock.Since(at) >= RetryForbidden {
			delete(w.forbidden, other)
		}
	}
	w.forbidden[ns] = w.clock.Now()
	w.log.Info("may not watch the pods of a namespace; its keys look again on their own (bind switchboard-consumer-reader there)", "namespace", ns)
}

// Changes says how many pod changes the watches saw (switchboard_operator_pod_watch_wakeups_total
// counts the keys they woke).
func (w *Watcher) Changes() uint64 { return w.changes.Load() }

// notify queues a change of ns's pods, once until it is dispatched.
func (w *Watcher) notify(ns string, nw *namespaceWatch) {
	w.changes.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watches[ns] != nw || nw.pending {
		return
	}
	select {
	case w.changed <- ns:
		nw.pending = true
	default:
		// As many namespaces are queued as may be watched: this cannot happen, and a key that
		// missed a change looks again on its own.
	}
}

// keepName is the informer's transform: of a pod it keeps its namespace, name and whether it is
// being deleted, so the memory of a watch is set by how many pods a namespace has, not by what
// they carry.
func keepName(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil // a tombstone: DeletedFinalStateUnknown
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: o.GetResourceVersion(),
			DeletionTimestamp: o.GetDeletionTimestamp()},
	}, nil
}

// deleting says the pod obj is being deleted.
func deleting(obj any) bool {
	o, ok := obj.(client.Object)
	return ok && o.GetDeletionTimestamp() != nil
}
