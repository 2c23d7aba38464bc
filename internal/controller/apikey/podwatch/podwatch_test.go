//go:build !unit

package podwatch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-dev/switchboard/internal/controller/apikey/podwatch"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

// start runs a Watcher as cfg until the test ends, and waits until it takes keys.
func start(t *testing.T, cfg *rest.Config, maxNamespaces int, clk *clocktesting.FakeClock) *podwatch.Watcher {
	t.Helper()
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := podwatch.New(md, maxNamespaces, clk, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the watcher stopped with an error: %v", err)
		}
	})
	return w
}

// want asks w for key until w runs, and returns what it answers once it does.
func want(t *testing.T, w *podwatch.Watcher, key types.NamespacedName) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if w.Want(key) {
			return true
		}
		if slices.Contains(w.Watching(), key.Namespace) || time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// woken collects the keys w wakes for a while after the first one, sorted, each as often as it
// was woken.
func woken(t *testing.T, w *podwatch.Watcher, within time.Duration) []string {
	t.Helper()
	var got []string
	timeout := time.After(within)
	for {
		select {
		case e := <-w.Events():
			got = append(got, e.Object.GetNamespace()+"/"+e.Object.GetName())
			timeout = time.After(500 * time.Millisecond) // the rest of the same change
		case <-timeout:
			sort.Strings(got)
			return got
		}
	}
}

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "api"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}, AutomountServiceAccountToken: new(bool)},
	}
}

// watched runs a Watcher as a cluster admin, with key "a" of a new namespace (prefix) waiting on
// its pods, past the wake-ups of the watch's first list.
func watched(t *testing.T, prefix string) (*podwatch.Watcher, types.NamespacedName) {
	t.Helper()
	ns := env.Namespace(t, prefix)
	ensureDefaultServiceAccount(t, ns)
	w := start(t, env.Config, 0, nil)
	key := types.NamespacedName{Namespace: ns, Name: "a"}
	if !want(t, w, key) {
		t.Fatal("the pods of the namespace are not watched")
	}
	woken(t, w, 2*time.Second)
	return w, key
}

// metric reads a metric of the operator's registry, 0 when it has no sample.
func metric(t *testing.T, name string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func ensureDefaultServiceAccount(t *testing.T, ns string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	if err := env.Client.Create(context.Background(), sa); err != nil {
		t.Fatal(err)
	}
}

// TestAChangeWakesTheKeysThatWait: the keys that wait on a namespace's pods are woken when a
// pod starts, and when one goes; a status change wakes no one; a released key is not woken,
// and the watch stops with the last key.
func TestAChangeWakesTheKeysThatWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wakeupsBefore := metric(t, "switchboard_operator_pod_watch_wakeups_total")
	w, a := watched(t, "pods")
	ns := a.Namespace
	b := types.NamespacedName{Namespace: ns, Name: "b"}
	if !w.Want(b) {
		t.Fatal("another key of a watched namespace was refused")
	}

	p := pod(ns, "api-1")
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, want := woken(t, w, 10*time.Second), []string{ns + "/a", ns + "/b"}; !slices.Equal(got, want) {
		t.Fatalf("a pod started: woke %v, want %v", got, want)
	}

	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := woken(t, w, 2*time.Second); len(got) != 0 {
		t.Fatalf("a status change woke %v", got)
	}

	w.Release(a)
	if err := env.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	// Its deletion may be seen twice (begun, then done): b is woken, a never.
	if got, want := slices.Compact(woken(t, w, 10*time.Second)), []string{ns + "/b"}; !slices.Equal(got, want) {
		t.Fatalf("a pod went: woke %v, want %v", got, want)
	}

	if got := metric(t, "switchboard_operator_pod_watch_wakeups_total"); got < wakeupsBefore+3 {
		t.Fatalf("switchboard_operator_pod_watch_wakeups_total %v after three wake-ups, was %v", got, wakeupsBefore)
	}
	w.Release(b)
	if slices.Contains(w.Watching(), ns) {
		t.Fatal("the namespace is still watched after its last key was released")
	}
}

// TestManyChangesWakeAKeyFewTimes: a tenant that starts 100 pods at once, while nobody takes
// the wake-ups, costs one queued change: the keys are woken a bounded number of times, not
// once per pod.
func TestManyChangesWakeAKeyFewTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, key := watched(t, "churn")
	ns := key.Namespace
	const pods = 100
	changesBefore := w.Changes()
	for i := range pods {
		if err := env.Client.Create(ctx, pod(ns, fmt.Sprintf("api-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Every start seen by the watch before anyone takes a wake-up.
	deadline := time.Now().Add(30 * time.Second)
	for changes := w.Changes(); changes-changesBefore < pods; changes = w.Changes() {
		if time.Now().After(deadline) {
			t.Fatalf("the watch saw %d of %d pods start", changes-changesBefore, pods)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := woken(t, w, 10*time.Second)
	if len(got) == 0 {
		t.Fatal("100 pods started and the key was not woken")
	}
	// The events channel holds 16, one more waits to be sent and one change is queued behind
	// it: the rest coalesced.
	if len(got) > 18 {
		t.Fatalf("100 pods woke the key %d times", len(got))
	}
	t.Logf("100 pods started: the key was woken %d times", len(got))
}

// TestANamespaceThatForbidsTheWatch: where the tenant granted list but not watch, the watch is
// refused, dropped, and not tried again for RetryForbidden (on the injected clock); the keys
// there look again on their own.
func TestANamespaceThatForbidsTheWatch(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t, "nowatch")
	cfg := env.ServiceAccount(t, ns, "operator", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	refusedBefore := metric(t, "switchboard_operator_pod_watches_refused_total")
	w := start(t, cfg, 0, clk)
	key := types.NamespacedName{Namespace: ns, Name: "a"}
	want(t, w, key)
	deadline := time.Now().Add(30 * time.Second)
	for slices.Contains(w.Watching(), ns) {
		if time.Now().After(deadline) {
			t.Fatal("a watch the namespace forbids was not dropped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if w.Want(key) {
		t.Fatal("the watch was tried again at once")
	}
	if got := metric(t, "switchboard_operator_pod_watches_refused_total"); got < refusedBefore+1 {
		t.Fatalf("switchboard_operator_pod_watches_refused_total %v after a refusal, was %v", got, refusedBefore)
	}
	clk.Step(podwatch.RetryForbidden)
	if !w.Want(key) {
		t.Fatal("the watch was not tried again after RetryForbidden")
	}
}

// TestTheShippedRoleLetsItWatch: bound in a namespace as a tenant binds it, the shipped
// switchboard-consumer-reader ClusterRole (config/rbac/consumer_reader_role.yaml) lets the
// operator watch the pods there: a pod that starts wakes the key.
func TestTheShippedRoleLetsItWatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t, "reader")
	ensureDefaultServiceAccount(t, ns)
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "consumer_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	if role.Name != "switchboard-consumer-reader" {
		t.Fatalf("the file holds ClusterRole %q", role.Name)
	}
	role.Name = "consumer-reader-" + ns // cluster-wide: one per test
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), role) })
	cfg := env.ServiceAccount(t, ns, "operator")
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "switchboard-consumer-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "operator"}},
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	// The binding reaches the authorizer a moment later: a refused watch would be tried again
	// only after RetryForbidden, so the watch starts once the authorizer allows it.
	cs := kubernetes.NewForConfigOrDie(cfg)
	deadline := time.Now().Add(30 * time.Second)
	for {
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "watch", Resource: "pods"}}}, metav1.CreateOptions{})
		if err == nil && review.Status.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shipped role does not let the operator watch pods: %v %+v", err, review)
		}
		time.Sleep(100 * time.Millisecond)
	}
	w := start(t, cfg, 0, nil)
	key := types.NamespacedName{Namespace: ns, Name: "a"}
	if !want(t, w, key) {
		t.Fatal("the pods of the namespace are not watched")
	}
	woken(t, w, 2*time.Second)
	if err := env.Client.Create(ctx, pod(ns, "api-1")); err != nil {
		t.Fatal(err)
	}
	if got := woken(t, w, 15*time.Second); !slices.Contains(got, ns+"/a") {
		t.Fatalf("a pod started under the shipped role: woke %v, watching %v", got, w.Watching())
	}
}

// TestAtMostMaxNamespaces: past its bound, a Watcher takes no other namespace, and the keys
// there look again on their own; switchboard_operator_pod_watches says how many are watched.
// Not parallel: no other test's watch moves the gauge meanwhile.
func TestAtMostMaxNamespaces(t *testing.T) {
	w := start(t, env.Config, 2, nil)
	one, two, three := env.Namespace(t, "max"), env.Namespace(t, "max"), env.Namespace(t, "max")
	before := metric(t, "switchboard_operator_pod_watches")
	if !want(t, w, types.NamespacedName{Namespace: one, Name: "a"}) || !w.Want(types.NamespacedName{Namespace: two, Name: "a"}) {
		t.Fatal("two namespaces were not watched")
	}
	if got := metric(t, "switchboard_operator_pod_watches"); got != before+2 {
		t.Fatalf("switchboard_operator_pod_watches %v with two namespaces watched, want %v", got, before+2)
	}
	if w.Want(types.NamespacedName{Namespace: three, Name: "a"}) {
		t.Fatal("a third namespace was watched past the bound of two")
	}
	if !w.Want(types.NamespacedName{Namespace: one, Name: "b"}) {
		t.Fatal("another key of a watched namespace was refused")
	}
	w.Release(types.NamespacedName{Namespace: two, Name: "a"})
	if got := metric(t, "switchboard_operator_pod_watches"); got != before+1 {
		t.Fatalf("switchboard_operator_pod_watches %v after one watch stopped, want %v", got, before+1)
	}
	if !w.Want(types.NamespacedName{Namespace: three, Name: "a"}) {
		t.Fatal("a namespace was refused after another's watch stopped")
	}
}
