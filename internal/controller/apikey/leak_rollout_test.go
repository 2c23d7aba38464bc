//go:build !unit

package apikey_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/workloads"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestLeakRolloutIsOptIn runs the operator as its ServiceAccount under the shipped RBAC
// (config/rbac: no right on workloads). In the namespace that bound switchboard-rollout as
// examples/leak-rollout-rolebinding.yaml does, a leaked delivered key's replacement rolls the
// Deployment and the StatefulSet that read the delivery Secret (and not the Deployment that
// does not); in the namespace that did not, nothing is patched and the Leaked condition says
// the namespace did not opt in, once, with no error loop.
func TestLeakRolloutIsOptIn(t *testing.T) {
	t.Parallel()
	system := env.Namespace(t, "rollout-system")
	optedIn, notOptedIn := env.Namespace(t, "rollout-in"), env.Namespace(t, "rollout-out")
	cfg := shippedOperatorIdentity(t, system)
	optIn(t, optedIn, system)
	op := startOperatorAs(t, cfg, nil, system, optedIn, notOptedIn)

	in := &keyTest{t: t, ns: optedIn, system: system, op: op}
	out := &keyTest{t: t, ns: notOptedIn, system: system, op: op}
	for _, kt := range []*keyTest{in, out} {
		createWorkload(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: kt.ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
			Selector: selector("web"), Template: podTemplate("web", envFromKey("web-key"))}})
		createWorkload(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: kt.ns, Name: "bystander"}, Spec: appsv1.DeploymentSpec{
			Selector: selector("bystander"), Template: podTemplate("bystander", corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}})}})
	}
	createWorkload(t, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: optedIn, Name: "db"}, Spec: appsv1.StatefulSetSpec{
		ServiceName: "db", Selector: selector("db"), Template: podTemplate("db", projectedKey("web-key"))}})

	keys := map[*keyTest]*switchboardv1alpha1.APIKey{}
	for _, kt := range []*keyTest{in, out} {
		key := kt.waitIssued(kt.create("web", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "web-key" }), 1)
		kt.report(system, kt.delivered("web-key"))
		keys[kt] = key
	}
	rolledAt := op.Clock.Now().UTC().Format(time.RFC3339)

	leakedSays := func(kt *keyTest, want string) {
		t.Helper()
		kt.waitFor(keys[kt], "Leaked says "+want, func(k *switchboardv1alpha1.APIKey) error {
			c, err := condition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked)
			if err != nil {
				return err
			}
			if c.Reason != switchboardv1alpha1.ReasonLeakReplaced || !strings.Contains(c.Message, want) {
				return fmt.Errorf("Leaked %s: %q", c.Reason, c.Message)
			}
			return nil
		})
	}
	leakedSays(in, "Secret web-key: 2 workloads rolled (Deployment/web, StatefulSet/db)")
	leakedSays(out, "the namespace did not opt in")
	// The one KeyLeaked Event says it all: where it was found, what was done, the last use.
	for kt, done := range map[*keyTest]string{in: "2 workloads rolled", out: "did not opt in"} {
		for _, want := range []string{leakURL, "refused and replaced", done, "no use recorded"} {
			kt.waitEvent(keys[kt], "KeyLeaked", want)
		}
	}

	for _, w := range []struct {
		obj  client.Object
		want string
	}{
		{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: optedIn, Name: "web"}}, rolledAt},
		{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: optedIn, Name: "db"}}, rolledAt},
		{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: optedIn, Name: "bystander"}}, ""},
		{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: notOptedIn, Name: "web"}}, ""},
	} {
		if got := restartedAt(t, w.obj); got != w.want {
			t.Errorf("%T %s/%s: %s %q, want %q", w.obj, w.obj.GetNamespace(), w.obj.GetName(), workloads.RestartedAtAnnotation, got, w.want)
		}
	}
	// The rollout is done once: another reconcile, a moment later, rolls nothing and says nothing new.
	op.Clock.Step(time.Minute)
	for _, kt := range []*keyTest{in, out} {
		poke(t, keys[kt])
	}
	time.Sleep(2 * time.Second)
	for _, kt := range []*keyTest{in, out} {
		if n := len(kt.events(keys[kt])["KeyLeaked"]); n != 1 {
			t.Errorf("%s: %d KeyLeaked Events, want 1", kt.ns, n)
		}
		if g := kt.get(keys[kt]).Status.KeyGeneration; g != 2 {
			t.Errorf("%s: key generation %d, want 2", kt.ns, g)
		}
	}
	if got := restartedAt(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: optedIn, Name: "web"}}); got != rolledAt {
		t.Errorf("the Deployment was rolled again: %q", got)
	}
}

// shippedOperatorIdentity creates the operator's ServiceAccount in system, bound as config/rbac
// binds it (its ClusterRole, and its Role in its own namespace), and returns its configuration.
func shippedOperatorIdentity(t *testing.T, system string) *rest.Config {
	t.Helper()
	ctx := testCtx(t)
	const sa = "switchboard-operator"
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: sa}}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: system, Name: sa}}
	for _, file := range []string{"role.yaml", "rollout_role.yaml"} {
		for _, role := range clusterRolesIn(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", file)) {
			if err := env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating ClusterRole %s: %v", role.Name, err)
			}
		}
	}
	role := &rbacv1.Role{}
	decodeFile(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "leader_election_role.yaml"), role)
	role.Namespace = system
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: system + "-operator"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "switchboard-operator"}},
		role,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "operator"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: system + "-operator"}})
	})
	return serviceAccountConfig(t, system, sa)
}

// optIn binds switchboard-rollout in ns to the operator's ServiceAccount of system, with the
// RoleBinding of examples/leak-rollout-rolebinding.yaml, its namespaces changed.
func optIn(t *testing.T, ns, system string) {
	t.Helper()
	b := &rbacv1.RoleBinding{}
	decodeFile(t, filepath.Join(testenv.RepoRoot(), "examples", "leak-rollout-rolebinding.yaml"), b)
	if b.RoleRef.Name != "switchboard-rollout" || len(b.Subjects) != 1 || b.Subjects[0].Name != "switchboard-operator" {
		t.Fatalf("the example binds %+v to %+v", b.RoleRef, b.Subjects)
	}
	b.Namespace, b.Subjects[0].Namespace = ns, system
	if err := env.Client.Create(testCtx(t), b); err != nil {
		t.Fatal(err)
	}
}

// decodeFile decodes the first document of a YAML file into obj.
func decodeFile(t *testing.T, path string, obj any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(obj); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
}

func createWorkload(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(testCtx(t), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func selector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

func podTemplate(app string, spec corev1.PodSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: spec}
}

// envFromKey reads Secret name's key as an environment variable.
func envFromKey(name string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app", Env: []corev1.EnvVar{{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "apiKey", Optional: ptr.To(true)}}}}}}}
}

// projectedKey mounts Secret name through a projected volume.
func projectedKey(name string) corev1.PodSpec {
	return corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "key", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}},
		Containers: []corev1.Container{{Name: "app", Image: "app", VolumeMounts: []corev1.VolumeMount{{Name: "key", MountPath: "/key"}}}},
	}
}

// restartedAt reads obj's pod template's restartedAt annotation.
func restartedAt(t *testing.T, obj client.Object) string {
	t.Helper()
	if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.Spec.Template.Annotations[workloads.RestartedAtAnnotation]
	case *appsv1.StatefulSet:
		return o.Spec.Template.Annotations[workloads.RestartedAtAnnotation]
	}
	t.Fatalf("no pod template in %T", obj)
	return ""
}
