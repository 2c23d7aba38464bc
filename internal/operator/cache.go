package operator

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// CacheOptions returns the manager cache configuration the controllers are built for. Tenants
// can create any Secret in their namespaces, labels included, so the operator's Secret cache
// takes as little of them as it can:
//
//   - in the system namespace, switchboard's Secrets, with the data of hash Secrets, which the
//     reconciler reads on every pass; in the signing namespace, the KeyWebhooks' signing
//     secrets' copies, without their data;
//   - elsewhere, only Secrets labelled as reveal or delivery Secrets, and of those only their
//     name, UID, resourceVersion, switchboard's labels, type and controller reference: never
//     their data (the plaintext keys, or whatever a tenant put there), annotations or
//     managedFields. The reconciler reads a key through the API server, the few times it must.
//
// Connections, APIKeys and KeyWebhooks lose their labels, annotations and managedFields, which the
// controllers never read: a tenant may write as many as the API server takes (kubectl's
// last-applied-configuration alone is a copy of the object), and every replica of the operator
// would hold them for every tenant. Other kinds lose their managedFields.
//
// system and signing are the configuration's systemNamespace and webhooks.signingNamespace;
// namespaces, when any, restrict the cache to them and the system namespace (Deps.Namespaces).
func CacheOptions(system, signing string, namespaces []string) cache.Options {
	inSystem := labels.SelectorFromSet(labels.Set{keysecret.LabelManagedBy: keysecret.ManagedBy})
	copies := labels.SelectorFromSet(labels.Set{keysecret.LabelManagedBy: keysecret.ManagedBy, keysecret.LabelComponent: keysecret.ComponentSigning})
	keyHolders := keyHolderSelector()
	secrets := cache.ByObject{
		Namespaces: map[string]cache.Config{system: {LabelSelector: inSystem}},
		Transform:  trimSecret(system, signing),
	}
	if signing != "" && signing != system {
		secrets.Namespaces[signing] = cache.Config{LabelSelector: copies}
	}
	c := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:                  secrets,
			&switchboardv1alpha1.APIKey{}:     {Transform: stripTenantMetadata},
			&switchboardv1alpha1.Connection{}: {Transform: stripTenantMetadata},
			// KeyWebhooks are read for their name, UID and event types (internal/controller/keyjournal).
			&switchboardv1alpha1.KeyWebhook{}: {Transform: stripTenantMetadata},
			// Only the system namespace's LeakReports are believed (tenants may create the kind
			// in theirs): the others are never even cached.
			&switchboardv1alpha1.LeakReport{}: {Namespaces: map[string]cache.Config{system: {}}},
		},
	}
	if len(namespaces) == 0 {
		secrets.Namespaces[cache.AllNamespaces] = cache.Config{LabelSelector: keyHolders}
		return c
	}
	c.DefaultNamespaces = map[string]cache.Config{system: {}}
	for _, ns := range namespaces {
		c.DefaultNamespaces[ns] = cache.Config{}
		if ns != system && ns != signing {
			secrets.Namespaces[ns] = cache.Config{LabelSelector: keyHolders}
		}
	}
	return c
}

// stripTenantMetadata drops what tenants write into an object's metadata and the controllers
// never read: labels, annotations and managed fields. Patches the controllers compute from a
// cached object (status, finalizers) are differences between two such copies, so they never
// touch what was dropped.
func stripTenantMetadata(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetLabels(nil)
		o.SetAnnotations(nil)
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// keyHolderSelector selects the Secrets that claim to hold a key: reveal and delivery Secrets.
func keyHolderSelector() labels.Selector {
	managed, err := labels.NewRequirement(keysecret.LabelManagedBy, selection.Equals, []string{keysecret.ManagedBy})
	if err != nil {
		panic(err)
	}
	component, err := labels.NewRequirement(keysecret.LabelComponent, selection.In, []string{keysecret.ComponentReveal, keysecret.ComponentDelivery})
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*managed, *component)
}

// trimSecret keeps of a Secret what the reconciler reads from the cache: the data of hash
// Secrets in the system namespace only, and of every Secret its identity, switchboard's
// labels (a signing copy's, in the system or the signing namespace), its type and its
// controller reference (which maps it to its APIKey).
func trimSecret(system, signing string) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return obj, nil
		}
		s.ManagedFields = nil
		s.Annotations = nil
		s.Finalizers = nil
		kept := map[string]string{}
		for _, k := range []string{keysecret.LabelManagedBy, keysecret.LabelComponent, keysecret.LabelAPIKeyNamespace,
			keysecret.LabelAPIKeyName, keysecret.LabelAPIKeyUID, keysecret.LabelGeneration, keysecret.LabelTemplate} {
			if v, ok := s.Labels[k]; ok {
				kept[k] = v
			}
		}
		for k, v := range s.Labels {
			if (s.Namespace == system || s.Namespace == signing) && keysecret.IsSigningLabel(k) {
				kept[k] = v
			}
		}
		s.Labels = kept
		owners := s.OwnerReferences
		s.OwnerReferences = nil
		for _, o := range owners {
			if o.Controller != nil && *o.Controller {
				s.OwnerReferences = []metav1.OwnerReference{o}
				break
			}
		}
		if s.Namespace != system || s.Labels[keysecret.LabelComponent] != keysecret.ComponentHash {
			s.Data = nil
		}
		s.StringData = nil
		return s, nil
	}
}
