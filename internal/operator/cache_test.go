//go:build !unit

package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestTenantSecretsDoNotFillTheCache (memory exhaustion): a tenant creates many large Secrets
// labelled like switchboard's reveal, delivery and hash Secrets. The operator's cache keeps the
// reveal and delivery look-alikes without their data, annotations or foreign labels, and no
// hash look-alike outside the system namespace; only the system namespace's hash Secrets keep
// their data.
func TestTenantSecretsDoNotFillTheCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	system, tenant := env.Namespace(t, "cache-system"), env.Namespace(t, "cache-tenant")
	mgr := startManager(t, testenv.OperatorConfiguration(system), operator.Deps{Namespaces: []string{tenant}})

	const tenantSecrets = 24
	big := map[string][]byte{keysecret.DataKey: []byte(strings.Repeat("x", 256<<10))}
	junkLabels := map[string]string{}
	for i := range 50 {
		junkLabels[fmt.Sprintf("junk-%d", i)] = strings.Repeat("j", 63)
	}
	labelled := func(component string) map[string]string {
		l := keysecret.Selector(component)
		for k, v := range junkLabels {
			l[k] = v
		}
		return l
	}
	var create []*corev1.Secret
	for i := range tenantSecrets {
		component := keysecret.ComponentReveal
		if i%2 == 1 {
			component = keysecret.ComponentDelivery
		}
		create = append(create, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: fmt.Sprintf("bulk-%d", i), Labels: labelled(component),
				Annotations: map[string]string{"note": strings.Repeat("a", 64<<10)}},
			Data: big,
		})
	}
	// Hash look-alikes in the tenant's namespace and an unlabelled Secret are not cached at all.
	create = append(create,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "fake-hash", Labels: labelled(keysecret.ComponentHash)}, Data: big},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "unlabelled"}, Data: big},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "apikey-real", Labels: keysecret.Selector(keysecret.ComponentHash)},
			Data: map[string][]byte{keysecret.DataHash: []byte("abc")}},
	)
	for _, s := range create {
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	testenv.Eventually(t, time.Minute, "the cache to hold the tenant's labelled Secrets", func() error {
		var list corev1.SecretList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(tenant)); err != nil {
			return err
		}
		if len(list.Items) < tenantSecrets {
			return fmt.Errorf("%d of %d cached", len(list.Items), tenantSecrets)
		}
		for _, s := range list.Items {
			if !strings.HasPrefix(s.Name, "bulk-") {
				t.Fatalf("the cache holds %s, which is no reveal or delivery look-alike", s.Name)
			}
			if len(s.Data) != 0 || len(s.StringData) != 0 {
				t.Fatalf("the cache holds the data of tenant Secret %s", s.Name)
			}
			if len(s.Annotations) != 0 || len(s.ManagedFields) != 0 {
				t.Fatalf("the cache holds the annotations or managedFields of %s", s.Name)
			}
			if len(s.Labels) != 2 {
				t.Fatalf("the cache holds foreign labels of %s: %d labels", s.Name, len(s.Labels))
			}
		}
		return nil
	})
	// The system namespace has an informer of its own, whose watch event may come after the
	// tenant's: wait for it rather than read once.
	hash := &corev1.Secret{}
	testenv.Eventually(t, time.Minute, "the cache to hold the system namespace's hash Secret", func() error {
		return mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: system, Name: "apikey-real"}, hash)
	})
	if string(hash.Data[keysecret.DataHash]) != "abc" {
		t.Fatal("the cache lost the data of a hash Secret in the system namespace")
	}
}

// TestTenantMetadataDoesNotFillTheCache: what a tenant writes into the metadata of its
// Connections and APIKeys (here 30 labels and 200 KiB of annotations each, kubectl's
// last-applied-configuration among them) is not kept by the operator's cache, and the
// controllers work as before over what is kept: the Connection gets its id, the APIKey its key.
func TestTenantMetadataDoesNotFillTheCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	system, tenant := env.Namespace(t, "meta-system"), env.Namespace(t, "meta-tenant")
	mgr := startManager(t, testenv.OperatorConfiguration(system), operator.Deps{Namespaces: []string{tenant}})

	meta := func(name string) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Namespace: tenant, Name: name, Labels: map[string]string{}, Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("{", 100<<10),
			"note": strings.Repeat("n", 100<<10),
		}}
		for i := range 30 {
			m.Labels[fmt.Sprintf("team.example.com/l%d", i)] = strings.Repeat("v", 63)
		}
		return m
	}
	conn := &switchboardv1alpha1.Connection{ObjectMeta: meta("warehouse")}
	key := &switchboardv1alpha1.APIKey{ObjectMeta: meta("ci")}
	for _, obj := range []client.Object{conn, key} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, time.Minute, "the controllers to act through the cache", func() error {
		c := &switchboardv1alpha1.Connection{}
		k := &switchboardv1alpha1.APIKey{}
		if err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(conn), c); err != nil {
			return err
		}
		if err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(key), k); err != nil {
			return err
		}
		for _, o := range []metav1.Object{c, k} {
			if len(o.GetLabels()) != 0 || len(o.GetAnnotations()) != 0 || len(o.GetManagedFields()) != 0 {
				t.Fatalf("the cache keeps %d labels, %d annotations and %d managed fields of %s", len(o.GetLabels()), len(o.GetAnnotations()), len(o.GetManagedFields()), o.GetName())
			}
		}
		if c.Status.ID == "" || k.Status.KeyGeneration != 1 {
			return fmt.Errorf("id %q, key generation %d", c.Status.ID, k.Status.KeyGeneration)
		}
		return nil
	})
	// Nothing the operator wrote took the tenant's metadata away.
	got := &switchboardv1alpha1.APIKey{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(key), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Labels) != 30 || len(got.Annotations) != 2 || len(got.Finalizers) != 1 {
		t.Fatalf("the APIKey has %d labels, %d annotations and finalizers %v", len(got.Labels), len(got.Annotations), got.Finalizers)
	}
}
