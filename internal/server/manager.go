package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// newManager builds a manager whose cache holds only what the server reads: Connections and
// APIKeys of every namespace, and the hash Secrets of the system namespace (selected by label),
// each trimmed by a transform to the fields the index uses. Every replica serves: no leader
// election.
func newManager(cfg *rest.Config, opts *Options, log logr.Logger) (ctrl.Manager, error) {
	hashSecrets := labels.SelectorFromSet(labels.Set{
		keysecret.LabelManagedBy: keysecret.ManagedBy,
		keysecret.LabelComponent: keysecret.ComponentHash,
	})
	return ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.Scheme,
		MapperProvider:         staticRESTMapper,
		Logger:                 log,
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}: {
					Namespaces: map[string]cache.Config{opts.SystemNamespace: {}},
					Label:      hashSecrets,
					Transform:  trimSecret,
				},
				&switchboardv1alpha1.APIKey{}:     {Transform: trimAPIKey},
				&switchboardv1alpha1.Connection{}: {Transform: trimConnection},
			},
		},
	})
}

// staticRESTMapper knows the only kinds the server reads or patches. With it, creating the
// manager makes no discovery call, so a server started while the API server is unreachable
// stays up, fails readiness and answers 503 until its caches sync, instead of exiting.
func staticRESTMapper(*rest.Config, *http.Client) (meta.RESTMapper, error) {
	m := meta.NewDefaultRESTMapper(nil)
	for _, r := range []struct {
		gvk              schema.GroupVersionKind
		plural, singular string
	}{
		{corev1.SchemeGroupVersion.WithKind("Secret"), "secrets", "secret"},
		{switchboardv1alpha1.GroupVersion.WithKind("APIKey"), "apikeys", "apikey"},
		{switchboardv1alpha1.GroupVersion.WithKind("Connection"), "connections", "connection"},
	} {
		m.AddSpecific(r.gvk, r.gvk.GroupVersion().WithResource(r.plural), r.gvk.GroupVersion().WithResource(r.singular), meta.RESTScopeNamespace)
	}
	return m, nil
}

// trimMeta keeps the metadata the index needs: identity, labels, creation and deletion times.
func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.Annotations = nil
	m.OwnerReferences = nil
	m.Finalizers = nil
}

func trimSecret(obj any) (any, error) {
	if s, ok := obj.(*corev1.Secret); ok {
		trimMeta(&s.ObjectMeta)
		for k := range s.Data {
			switch k {
			case keysecret.DataHash, keysecret.DataPreviousHash, keysecret.DataPreviousValidUntil:
			default:
				delete(s.Data, k)
			}
		}
		s.StringData = nil
	}
	return obj, nil
}

func trimAPIKey(obj any) (any, error) {
	if k, ok := obj.(*switchboardv1alpha1.APIKey); ok {
		trimMeta(&k.ObjectMeta)
		k.Labels = nil
		k.Spec.Description = ""
		k.Spec.Rotation = nil
		k.Status = switchboardv1alpha1.APIKeyStatus{KeyHint: k.Status.KeyHint, LastUsedAt: k.Status.LastUsedAt}
	}
	return obj, nil
}

func trimConnection(obj any) (any, error) {
	if c, ok := obj.(*switchboardv1alpha1.Connection); ok {
		trimMeta(&c.ObjectMeta)
		c.Spec.CredentialsSecretRef = nil
		c.Status = switchboardv1alpha1.ConnectionStatus{ID: c.Status.ID}
	}
	return obj, nil
}

// registerIndex feeds the index from the manager's informers and returns the registrations,
// whose HasSynced becomes true once the initial list has been delivered to the index.
func registerIndex(ctx context.Context, mgr ctrl.Manager, idx *keyindex.Index, log logr.Logger) ([]toolscache.ResourceEventHandlerRegistration, error) {
	feeds := []struct {
		obj     client.Object
		handler toolscache.ResourceEventHandler
	}{
		{&corev1.Secret{}, idx.HashSecretHandler(log)},
		{&switchboardv1alpha1.APIKey{}, idx.APIKeyHandler(log)},
		{&switchboardv1alpha1.Connection{}, idx.ConnectionHandler(log)},
	}
	regs := make([]toolscache.ResourceEventHandlerRegistration, 0, len(feeds))
	for _, f := range feeds {
		inf, err := mgr.GetCache().GetInformer(ctx, f.obj, cache.BlockUntilSynced(false))
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
