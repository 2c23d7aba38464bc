//go:build !unit

package apikey_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// The binding's record (spec.binding resolved by the operator into the hash Secret, which the
// server enforces), end to end on a real API server: envtest runs no kubelet and no controller,
// so consumer pods are created as objects, and the operator must be woken by their changes alone.

// bindingOf reads the binding record of key's hash Secret (nil: none).
func (kt *keyTest) bindingOf(key *switchboardv1alpha1.APIKey) (*keysecret.Binding, error) {
	hash, err := kt.hashSecret(key)
	if err != nil {
		return nil, err
	}
	raw, ok := hash.Data[keysecret.DataBinding]
	if !ok {
		return nil, nil
	}
	return keysecret.ParseBinding(raw)
}

// waitBinding waits until key's hash Secret records want (nil: none). Nothing pokes the key.
func (kt *keyTest) waitBinding(key *switchboardv1alpha1.APIKey, what string, want *keysecret.Binding) {
	kt.t.Helper()
	eventually(kt.t, "APIKey "+key.Name+": "+what, func() error {
		got, err := kt.bindingOf(key)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("recorded %+v, want %+v", got, want)
		}
		return nil
	})
}

// countWrites counts the updates of key's hash Secret from now on, by watching it.
func (kt *keyTest) countWrites(key *switchboardv1alpha1.APIKey) func() int {
	kt.t.Helper()
	w, err := env.Client.Watch(testCtx(kt.t), &corev1.SecretList{}, client.InNamespace(kt.system),
		client.MatchingFields{"metadata.name": keysecret.HashName(key.UID)})
	if err != nil {
		kt.t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	go func() {
		for e := range w.ResultChan() {
			if e.Type == watch.Modified {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}
	}()
	kt.t.Cleanup(w.Stop)
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// createServiceAccount creates ServiceAccount name in ns, which pods are admitted against.
func createServiceAccount(t *testing.T, ns, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Create(testCtx(t), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createReader creates, with no workload above it, pod name of ns running as ServiceAccount sa
// ("" for none named) and mounting Secret secret as a volume ("" for none).
func createReader(t *testing.T, ns, name, sa, secret string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if secret != "" {
		p.Spec.Volumes = []corev1.Volume{{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "key", MountPath: "/key"}}
	}
	if err := env.Client.Create(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBindingRecordsNamedServiceAccounts: a key bound to ServiceAccount a gets, with its first
// hash, the record the server reads, and says so in WorkloadBinding.
func TestBindingRecordsNamedServiceAccounts(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("named", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Binding = &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"a"}}
	}), 1)
	want := &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"a"}}
	if got, err := kt.bindingOf(key); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("once the key is issued, its hash Secret records %+v (%v), want %+v", got, err, want)
	}
	kt.waitFor(key, "WorkloadBinding Recorded", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionWorkloadBinding, metav1.ConditionTrue, switchboardv1alpha1.ReasonBindingRecorded)
	})
	if h, err := keysecret.ParseHash(kt.mustHash(key)); err != nil || h.Binding == nil || h.Binding.Mode != switchboardv1alpha1.BindingEnforce {
		t.Fatalf("the server's reading of the hash Secret: %+v, %v", h.Binding, err)
	}
}

// TestBindingFollowsConsumers: a key delivered into app-key and bound to its consumers. A pod of
// its namespace, with no Deployment above it, that mounts app-key as ServiceAccount web is
// recorded within seconds, woken by the pod's creation alone; a pod of another namespace that
// mounts a Secret named app-key there, and one of the key's namespace that does not read it,
// are not; the pod deleted, web goes; spec.binding removed, the record goes. Each change costs
// one write of the hash Secret, and reconciles that change nothing write nothing.
func TestBindingFollowsConsumers(t *testing.T) {
	kt := newKeyTest(t)
	other := env.Namespace(t, "elsewhere")
	createServiceAccount(t, kt.ns, "web")
	createServiceAccount(t, kt.ns, "default")
	createServiceAccount(t, other, "intruder")
	key := kt.waitIssued(kt.create("consumers", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.SecretName = "app-key"
		k.Spec.Binding = &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, Consumers: true}
	}), 1)
	none := &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce}
	kt.waitBinding(key, "no consumer yet", none)
	kt.quiet(key)
	writes := kt.countWrites(key)

	createReader(t, other, "intruder", "intruder", "app-key")
	createReader(t, kt.ns, "unrelated", "", "")
	kt.quiet(key)
	started := time.Now()
	pod := createReader(t, kt.ns, "web", "web", "app-key")
	web := &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}
	kt.waitBinding(key, "web recorded, woken by its pod's creation", web)
	t.Logf("the consumer's ServiceAccount recorded %v after its pod was created", time.Since(started).Round(time.Millisecond))
	kt.waitFor(key, "WorkloadBinding Recorded", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionWorkloadBinding, metav1.ConditionTrue, switchboardv1alpha1.ReasonBindingRecorded)
	})

	// Nothing changed: a poke (a spec change, reconciled), and a pod that does not read the
	// Secret (the watch wakes the key), write nothing.
	kt.quiet(key)
	before := writes()
	poke(t, key)
	createReader(t, kt.ns, "unrelated-2", "", "")
	kt.waitFor(key, "the poke reconciled", func(*switchboardv1alpha1.APIKey) error { return nil })
	kt.quiet(key)
	if n := writes() - before; n != 0 {
		t.Fatalf("%d writes of the hash Secret when nothing of the binding changed", n)
	}
	if got, _ := kt.bindingOf(key); !reflect.DeepEqual(got, web) {
		t.Fatalf("recorded %+v, want %+v", got, web)
	}

	if err := env.Client.Delete(testCtx(t), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	kt.waitBinding(key, "web gone with its pod", none)

	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) { k.Spec.Binding = nil })
	kt.waitBinding(key, "the record gone with spec.binding", nil)
	kt.waitFor(key, "no WorkloadBinding condition", func(k *switchboardv1alpha1.APIKey) error {
		if c, err := condition(k.Status.Conditions, switchboardv1alpha1.ConditionWorkloadBinding); err == nil {
			return fmt.Errorf("WorkloadBinding %s/%s", c.Status, c.Reason)
		}
		return nil
	})
	kt.quiet(key)
	// web recorded, web removed, the record removed: three writes.
	if n := writes(); n != 3 {
		t.Fatalf("%d writes of the hash Secret for three changes of the binding", n)
	}
}

// TestBindingConsumersUnderTheShippedGrant: the operator with its shipped rights (config/rbac:
// none on pods). In the namespace that bound switchboard-consumer-reader, the consumer's
// ServiceAccount is recorded, woken by its pod's creation; in the one that did not, the record
// holds the named ServiceAccount only and WorkloadBinding says why, with a Warning Event.
func TestBindingConsumersUnderTheShippedGrant(t *testing.T) {
	t.Parallel()
	system := env.Namespace(t, "binding-system")
	optedIn, notOptedIn := env.Namespace(t, "binding-in"), env.Namespace(t, "binding-out")
	cfg := shippedOperatorIdentity(t, system)
	for _, role := range clusterRolesIn(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "consumer_reader_role.yaml")) {
		if err := env.Client.Create(testCtx(t), role); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(testCtx(t), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: optedIn, Name: "switchboard-consumer-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: system, Name: "switchboard-operator"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "switchboard-consumer-reader"}}); err != nil {
		t.Fatal(err)
	}
	op := startOperatorAs(t, cfg, nil, system, optedIn, notOptedIn)
	in := &keyTest{t: t, ns: optedIn, system: system, op: op}
	out := &keyTest{t: t, ns: notOptedIn, system: system, op: op}
	keys := map[*keyTest]*switchboardv1alpha1.APIKey{}
	for _, kt := range []*keyTest{in, out} {
		createServiceAccount(t, kt.ns, "web")
		keys[kt] = kt.waitIssued(kt.create("bound", func(k *switchboardv1alpha1.APIKey) {
			k.Spec.SecretName = "app-key"
			k.Spec.Binding = &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingReportOnly, Consumers: true, ServiceAccounts: []string{"named"}}
		}), 1)
		kt.waitBinding(keys[kt], "the named ServiceAccount", &keysecret.Binding{Mode: switchboardv1alpha1.BindingReportOnly, ServiceAccounts: []string{"named"}})
		createReader(t, kt.ns, "web", "web", "app-key")
	}
	in.waitBinding(keys[in], "web recorded under the tenant's grant", &keysecret.Binding{Mode: switchboardv1alpha1.BindingReportOnly, ServiceAccounts: []string{"named", "web"}})
	got := out.waitFor(keys[out], "WorkloadBinding ConsumersNotReadable", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionWorkloadBinding, metav1.ConditionFalse, switchboardv1alpha1.ReasonConsumersNotReadable)
	})
	out.waitEvent(got, "Binding"+switchboardv1alpha1.ReasonConsumersNotReadable, "switchboard-consumer-reader")
	out.quiet(keys[out])
	if b, err := out.bindingOf(keys[out]); err != nil || !reflect.DeepEqual(b, &keysecret.Binding{Mode: switchboardv1alpha1.BindingReportOnly, ServiceAccounts: []string{"named"}}) {
		t.Fatalf("the namespace that granted nothing: recorded %+v (%v)", b, err)
	}
}
