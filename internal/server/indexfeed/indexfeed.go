// Package indexfeed keeps the server's index (package keyindex) in step with the cluster: an
// informer cache that holds only what the index reads, each object cut down as it arrives, and
// every change fed to the index. The index it fills is what keycheck looks keys up in, v1api
// lists Connections from and lastused reads keys' use from.
package indexfeed

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/v1api"
)

// The server's cache holds only what it serves, and every replica holds all of it, so each
// object is cut down as it arrives (a cache transform) to what the index reads:
//
//   - hash Secrets: only those of the system namespace, of the hash type and labelled as
//     switchboard's (selected by the API server, so nothing else is even sent); the cache keeps
//     a cachedHashSecret: identity and the hashes the index takes, read once here;
//   - APIKeys: a cachedAPIKey: identity and the index's Key (revocation, deletion, expiry,
//     selector, policy, last use), built once here;
//   - APIKeyRoles: identity and the rules, compiled once here;
//   - APIKeyCreditPools: identity and the credits, read once here;
//   - Connections: identity, labels and the /v1 JSON, encoded here once. The object the cache
//     keeps is a cachedConnection, not the Connection: its spec would be a second copy of the JSON.

// Options configure a Feed.
type Options struct {
	// SystemNamespace holds the hash Secrets; no other namespace's Secrets are read.
	SystemNamespace string
	// Logger receives what the feed cannot index (a hash Secret or an APIKey that breaks the
	// contract, a Connection that cannot be encoded).
	Logger logr.Logger
}

// Feed is the informers and the index they fill.
type Feed struct {
	index     *keyindex.Index
	informers cache.Cache
	regs      []toolscache.ResourceEventHandlerRegistration
}

// New returns a Feed that, once started, fills a new index from cfg's API server.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Feed, error) {
	informers, err := newInformers(cfg, &o)
	if err != nil {
		return nil, fmt.Errorf("creating the cache: %w", err)
	}
	idx := keyindex.New()
	regs, err := registerIndex(ctx, informers, idx, o.Logger)
	if err != nil {
		return nil, err
	}
	return &Feed{index: idx, informers: informers, regs: regs}, nil
}

// Index is the index the feed fills: complete once HasSynced.
func (f *Feed) Index() *keyindex.Index { return f.index }

// Start runs the informers until ctx is done.
func (f *Feed) Start(ctx context.Context) error { return f.informers.Start(ctx) }

// HasSynced reports whether every informer has delivered its initial list to the index.
func (f *Feed) HasSynced() bool {
	for _, r := range f.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// newInformers is the cache that holds only what the server reads. It is started apart from
// the manager, which would wait for it to sync before anything else, and, told to stop before it
// has (a cache that cannot list: missing RBAC, say), never return (controller-runtime's
// runnableGroup.Start spins on a done context: kubernetes-sigs/controller-runtime#3440). The
// server's readiness waits for the sync instead (HasSynced).
func newInformers(cfg *rest.Config, opts *Options) (cache.Cache, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := RESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	hashSecrets := labels.SelectorFromSet(labels.Set{
		keysecret.LabelManagedBy: keysecret.ManagedBy,
		keysecret.LabelComponent: keysecret.ComponentHash,
	})
	return cache.New(cfg, cache.Options{
		HTTPClient:       httpClient,
		Scheme:           scheme.Scheme,
		Mapper:           mapper,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{opts.SystemNamespace: {}},
				Label:      hashSecrets,
				Field:      fields.OneTermEqualSelector("type", string(keysecret.TypeHash)),
				Transform:  compactHashSecret,
			},
			&switchboardv1alpha1.APIKey{}:           {Transform: compactAPIKey},
			&switchboardv1alpha1.APIKeyRole{}:       {Transform: compactAPIKeyRole},
			&switchboardv1alpha1.APIKeyCreditPool{}: {Transform: compactAPIKeyCreditPool},
			&switchboardv1alpha1.Connection{}:       {Transform: compactConnection},
		},
	})
}

// RESTMapper knows the only kinds the server reads, patches (APIKeys' status, internal/
// lastused) or creates (LeakReports, internal/server/leakreceiver). With it, creating the cache or a manager makes no discovery call, so a server
// started while the API server is unreachable stays up, fails readiness and answers 503 until
// its caches sync, instead of exiting.
func RESTMapper(*rest.Config, *http.Client) (meta.RESTMapper, error) {
	m := meta.NewDefaultRESTMapper(nil)
	for _, r := range []struct {
		gvk              schema.GroupVersionKind
		plural, singular string
	}{
		{corev1.SchemeGroupVersion.WithKind("Secret"), "secrets", "secret"},
		{switchboardv1alpha1.GroupVersion.WithKind("APIKey"), "apikeys", "apikey"},
		{switchboardv1alpha1.GroupVersion.WithKind("APIKeyRole"), "apikeyroles", "apikeyrole"},
		{switchboardv1alpha1.GroupVersion.WithKind("APIKeyCreditPool"), "apikeycreditpools", "apikeycreditpool"},
		{switchboardv1alpha1.GroupVersion.WithKind("Connection"), "connections", "connection"},
		{switchboardv1alpha1.GroupVersion.WithKind("LeakReport"), "leakreports", "leakreport"},
	} {
		m.AddSpecific(r.gvk, r.gvk.GroupVersion().WithResource(r.plural), r.gvk.GroupVersion().WithResource(r.singular), meta.RESTScopeNamespace)
	}
	return m, nil
}

// cachedHashSecret is what the server's cache keeps of a hash Secret: the metadata that keys it
// in the informer's store, and the hashes the index takes from it, read once here.
type cachedHashSecret struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	hashes *keyindex.HashSecret
}

// DeepCopyObject makes cachedHashSecret a runtime.Object. hashes is immutable and shared.
func (s *cachedHashSecret) DeepCopyObject() k8sruntime.Object {
	out := *s
	s.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// compactHashSecret turns a hash Secret into its cachedHashSecret. It is idempotent, as
// transforms must be.
func compactHashSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	return &cachedHashSecret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		hashes:     keyindex.ReadHashSecret(s),
	}, nil
}

// cached is what the server's cache keeps of an object: the metadata that keys it in the
// informer's store, and the index's entry for it, built once here (with err, why it is not the
// object's whole reading). A cache transform may return another object than it was given
// (client-go's TransformFunc); nothing reads APIKeys or Connections from this cache but the
// index feed, so none needs the full object. The usage writer patches status by name, for keys
// the index still holds by UID (patchLastUsed says why a status patch cannot carry the UID).
type cached[E any] struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	entry E
	err   error
}

// DeepCopyObject makes cached a runtime.Object. entry is immutable and shared.
func (c *cached[E]) DeepCopyObject() k8sruntime.Object {
	out := *c
	c.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// cachedAPIKey keeps of an APIKey the index's Key (with err, what of the spec it enforces as the
// strictest reading).
type cachedAPIKey = cached[*keyindex.Key]

// cachedAPIKeyRole keeps of an APIKeyRole its rules, compiled (with err, why they are taken as
// refusing everything).
type cachedAPIKeyRole = cached[*permission.Rules]

// cachedAPIKeyCreditPool keeps of an APIKeyCreditPool its credits, read (with err, when read
// past what the CRD allows: the strictest reading).
type cachedAPIKeyCreditPool = cached[*keyindex.CreditPool]

// cachedConnection keeps of a Connection the index's Conn (nil while the Connection has no
// status.id, or when it cannot be encoded, then with err).
type cachedConnection = cached[*keyindex.Conn]

// compact makes the cache transform of objects of type O: the cached object of their identity
// and of what read makes of them, read once. It is idempotent, as transforms must be.
func compact[O client.Object, E any](read func(O) (E, error)) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		o, ok := obj.(O)
		if !ok {
			return obj, nil
		}
		entry, err := read(o)
		return &cached[E]{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID(), ResourceVersion: o.GetResourceVersion()},
			entry:      entry, err: err,
		}, nil
	}
}

// compactAPIKey turns an APIKey into its cachedAPIKey.
var compactAPIKey = compact(keyindex.NewKey)

// compactAPIKeyRole turns an APIKeyRole into its cachedAPIKeyRole: its rules compiled, refusing
// everything when they do not compile.
var compactAPIKeyRole = compact(func(r *switchboardv1alpha1.APIKeyRole) (*permission.Rules, error) {
	return permission.CompileRole(r.Name, r.Spec.Rules)
})

// compactAPIKeyCreditPool turns an APIKeyCreditPool into its cachedAPIKeyCreditPool.
var compactAPIKeyCreditPool = compact(keyindex.ReadCreditPool)

// compactConnection turns a Connection into its cachedConnection, encoding its /v1 JSON. It is
// idempotent, as transforms must be.
func compactConnection(obj any) (any, error) {
	c, ok := obj.(*switchboardv1alpha1.Connection)
	if !ok {
		return obj, nil
	}
	out := &cachedConnection{ObjectMeta: metav1.ObjectMeta{
		Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion, Labels: c.Labels,
	}}
	if c.Status.ID == "" {
		return out, nil
	}
	raw, err := v1api.EncodeConnection(c)
	if err != nil {
		// Not the transform's error: client-go would drop the event and the index would keep
		// the Connection's previous JSON. The feed logs it and delists the Connection.
		out.err = err
		return out, nil //nolint:nilerr // see above
	}
	out.entry = &keyindex.Conn{ID: c.Status.ID, Name: c.Name, Labels: labels.Set(c.Labels), Encoded: raw}
	return out, nil
}

// registerIndex feeds the index from the informers and returns the registrations, whose
// HasSynced becomes true once the initial list has been delivered to the index.
func registerIndex(ctx context.Context, informers cache.Informers, idx *keyindex.Index, log logr.Logger) ([]toolscache.ResourceEventHandlerRegistration, error) {
	feeds := []struct {
		obj     client.Object
		handler toolscache.ResourceEventHandler
	}{
		{&corev1.Secret{}, feedHashSecrets(idx, log)},
		{&switchboardv1alpha1.APIKey{}, feedAPIKeys(idx, log)},
		{&switchboardv1alpha1.APIKeyRole{}, feedAPIKeyRoles(idx, log)},
		{&switchboardv1alpha1.APIKeyCreditPool{}, feedAPIKeyCreditPools(idx, log)},
		{&switchboardv1alpha1.Connection{}, feedConnections(idx, log)},
	}
	regs := make([]toolscache.ResourceEventHandlerRegistration, 0, len(feeds))
	for _, f := range feeds {
		inf, err := informers.GetInformer(ctx, f.obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("getting the informer for %T: %w", f.obj, err)
		}
		reg, err := inf.AddEventHandler(f.handler)
		if err != nil {
			return nil, fmt.Errorf("adding the index handler for %T: %w", f.obj, err)
		}
		regs = append(regs, reg)
	}
	return regs, nil
}

// feed makes an informer handler: set on add and update, remove on delete (also when the
// informer missed the deletion and hands over a tombstone).
func feed[T any](set func(T), remove func(T)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setIf(obj, set) },
		UpdateFunc: func(_, obj any) { setIf(obj, set) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(T); ok {
				remove(o)
			}
		},
	}
}

func setIf[T any](obj any, set func(T)) {
	if o, ok := obj.(T); ok {
		set(o)
	}
}

func feedHashSecrets(idx *keyindex.Index, log logr.Logger) toolscache.ResourceEventHandler {
	return feed(func(s *cachedHashSecret) {
		err := idx.PutHashSecret(s.hashes)
		duplicateHashes.Set(float64(idx.Stats().DuplicateHashes))
		var dup *keyindex.DuplicateError
		switch {
		case errors.As(err, &dup):
			log.Error(err, "two hash Secrets hold the same hash: it authenticates nobody until one of them is removed", "secret", s.Name, "others", dup.Others)
		case err != nil:
			log.Error(err, "ignoring a hash Secret that does not follow the contract", "secret", s.Name)
		}
	}, func(s *cachedHashSecret) {
		idx.DeleteHashSecret(s.Name)
		duplicateHashes.Set(float64(idx.Stats().DuplicateHashes))
	})
}

func feedAPIKeys(idx *keyindex.Index, log logr.Logger) toolscache.ResourceEventHandler {
	return feed(func(k *cachedAPIKey) {
		idx.PutKey(k.entry)
		if k.err != nil {
			log.Error(k.err, "APIKey has a spec the CRD's schema refuses; the invalid parts are enforced as the strictest reading", "namespace", k.Namespace, "name", k.Name)
		}
	}, func(k *cachedAPIKey) { idx.DeleteAPIKey(k.UID) })
}

func feedAPIKeyRoles(idx *keyindex.Index, log logr.Logger) toolscache.ResourceEventHandler {
	return feed(func(r *cachedAPIKeyRole) {
		idx.PutRole(r.Namespace, r.Name, r.entry)
		if r.err != nil {
			log.Error(r.err, "APIKeyRole has rules that do not compile; the keys naming it are allowed nothing", "namespace", r.Namespace, "name", r.Name)
		}
	}, func(r *cachedAPIKeyRole) { idx.DeleteRole(r.Namespace, r.Name) })
}

func feedAPIKeyCreditPools(idx *keyindex.Index, log logr.Logger) toolscache.ResourceEventHandler {
	return feed(func(p *cachedAPIKeyCreditPool) {
		idx.PutCreditPool(p.Namespace, p.Name, p.entry)
		if p.err != nil {
			log.Error(p.err, "APIKeyCreditPool has credits the CRD's schema refuses; they are enforced as the strictest reading", "namespace", p.Namespace, "name", p.Name)
		}
	}, func(p *cachedAPIKeyCreditPool) { idx.DeleteCreditPool(p.Namespace, p.Name) })
}

func feedConnections(idx *keyindex.Index, log logr.Logger) toolscache.ResourceEventHandler {
	return feed(func(c *cachedConnection) {
		switch {
		case c.entry != nil:
			idx.SetConnection(c.Namespace, c.entry)
			if n := len(c.entry.Encoded); n > v1api.MaxConnectionJSON {
				log.Info("Connection is larger than the CRD's schema allows (it was stored before the schema bounded it): it is listed, and costs every replica its size; re-apply it within the bounds",
					"namespace", c.Namespace, "name", c.Name, "bytes", n, "bound", v1api.MaxConnectionJSON)
			}
		case c.err != nil:
			idx.DeleteConnection(c.Namespace, c.Name)
			log.Error(c.err, "Connection cannot be listed", "namespace", c.Namespace, "name", c.Name)
		default: // no status.id yet, or not any more
			idx.DeleteConnection(c.Namespace, c.Name)
		}
	}, func(c *cachedConnection) { idx.DeleteConnection(c.Namespace, c.Name) })
}

// duplicateHashes counts the hashes the index refuses because two hash Secrets hold them.
var duplicateHashes = metrics.Registered.NewGauge(prometheus.GaugeOpts{Name: "switchboard_api_duplicate_key_hashes", Help: "Key hashes held by more than one hash Secret; each authenticates nobody. Anything but 0 needs a look."})
