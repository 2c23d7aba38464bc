//go:build !unit

package apikey_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

// The old key's grace ending on evidence (spec.graceEndsWhenUnusedFor), end to end on a real
// API server, with the operator's injected clock: the server's record of use is written as the
// server writes it (a merge patch of status.previousKeyUse).

// recordPreviousUse writes status.previousKeyUse as the API server does when the old key
// (generation gen) authenticates a request at at.
func (kt *keyTest) recordPreviousUse(key *switchboardv1alpha1.APIKey, gen int64, at time.Time) {
	kt.t.Helper()
	body := fmt.Sprintf(`{"status":{"lastUsedAt":%q,"previousKeyUse":{"keyGeneration":%d,"lastUsedAt":%q}}}`,
		at.UTC().Format(time.RFC3339), gen, at.UTC().Format(time.RFC3339))
	if err := env.Client.Status().Patch(testCtx(kt.t), kt.get(key), client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		kt.t.Fatal(err)
	}
}

// graceEvidence waits for the GraceEvidence condition's status and reason. Nothing but time
// changes the evidence, and the injected clock wakes no one: each look pokes the APIKey.
func (kt *keyTest) graceEvidence(key *switchboardv1alpha1.APIKey, status metav1.ConditionStatus, reason string) *switchboardv1alpha1.APIKey {
	kt.t.Helper()
	poke(kt.t, key)
	return kt.waitFor(key, "GraceEvidence "+reason, func(k *switchboardv1alpha1.APIKey) error {
		err := hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence, status, reason)
		if err != nil {
			poke(kt.t, key)
		}
		return err
	})
}

// rotateWithGrace rotates key with a fixed grace and waits for generation gen.
func (kt *keyTest) rotateWithGrace(key *switchboardv1alpha1.APIKey, requestedAt string, grace time.Duration, gen int64) *switchboardv1alpha1.APIKey {
	kt.t.Helper()
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: requestedAt, GracePeriod: metav1.Duration{Duration: grace}}
	})
	return kt.waitIssued(key, gen)
}

// TestGraceEndsWhenTheOldKeyGoesQuiet: a revealed key rotated with a day's grace and a quiet
// period of 10m. While the old key is used its grace stays (6m after its last use, it still
// authenticates); 10m after its last use the operator drops its hash, hours before the fixed
// bound, and says so in GraceEvidence and an Event.
func TestGraceEndsWhenTheOldKeyGoesQuiet(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("quiet", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.GraceEndsWhenUnusedFor = durationOf(10 * time.Minute)
	}), 1)
	old, err := keyclient.Claim(testCtx(t), env.Client, key)
	if err != nil {
		t.Fatal(err)
	}
	rotated := kt.rotateWithGrace(key, "r1", 24*time.Hour, 2)
	kt.graceEvidence(key, metav1.ConditionFalse, switchboardv1alpha1.ReasonPreviousKeyInUse)

	kt.op.Clock.Step(5 * time.Minute)
	kt.recordPreviousUse(key, 1, kt.op.Clock.Now())
	kt.op.Clock.Step(6 * time.Minute) // 11m after the rotation, 6m after the last use
	got := kt.graceEvidence(key, metav1.ConditionFalse, switchboardv1alpha1.ReasonPreviousKeyInUse)
	if got.Status.PreviousKeyValidUntil == nil {
		t.Fatal("the old key's grace ended 6m after its last use, within the quiet period")
	}
	if res := kt.lookupAt(key, old.Key, kt.op.Clock.Now()); res != keyindex.OK {
		t.Fatalf("the old key within its grace: %v, want ok", res)
	}

	kt.op.Clock.Step(4*time.Minute + time.Second) // 10m after its last use
	got = kt.graceEvidence(key, metav1.ConditionTrue, switchboardv1alpha1.ReasonConsumersMoved)
	kt.waitFor(key, "the old key's grace over", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.PreviousKeyValidUntil != nil {
			return fmt.Errorf("previousKeyValidUntil %v", k.Status.PreviousKeyValidUntil)
		}
		return nil
	})
	if _, ok := kt.mustHash(key).Data[keysecret.DataPreviousHash]; ok {
		t.Fatal("the old key's hash outlived the evidence")
	}
	if res := kt.lookupAt(key, old.Key, kt.op.Clock.Now()); res == keyindex.OK {
		t.Fatal("the old key still authenticates after its grace ended on evidence")
	}
	kt.waitEvent(got, apikeyctrl.ReasonGraceEndedEarly, "key generation 1 was last used at")
	if rotated.Status.KeyGeneration != 2 || kt.get(key).Status.KeyGeneration != 2 {
		t.Fatal("ending the grace changed the current key")
	}
}

// TestGraceStaysAtMostTheFixedBound: an old key used until the end of a 15m grace is refused at
// that end, whatever its quiet period: evidence only shortens the grace.
func TestGraceStaysAtMostTheFixedBound(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("bound", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.GraceEndsWhenUnusedFor = durationOf(10 * time.Minute)
	}), 1)
	kt.rotateWithGrace(key, "r1", 15*time.Minute, 2)
	kt.op.Clock.Step(9 * time.Minute)
	kt.recordPreviousUse(key, 1, kt.op.Clock.Now())
	kt.op.Clock.Step(5 * time.Minute) // 14m: used 5m ago
	kt.graceEvidence(key, metav1.ConditionFalse, switchboardv1alpha1.ReasonPreviousKeyInUse)
	if kt.get(key).Status.PreviousKeyValidUntil == nil {
		t.Fatal("the old key's grace ended while it was in use")
	}
	kt.op.Clock.Step(time.Minute + time.Second) // 15m: the fixed bound
	poke(t, key)
	kt.waitFor(key, "the old key dropped at the fixed bound", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.PreviousKeyValidUntil != nil {
			return fmt.Errorf("previousKeyValidUntil %v", k.Status.PreviousKeyValidUntil)
		}
		return nil
	})
	if notes := kt.events(key)[apikeyctrl.ReasonGraceEndedEarly]; len(notes) != 0 {
		t.Fatalf("a grace that ran out was reported as ended early: %v", notes)
	}
}

// TestGraceWaitsForPodsThatTakeTheKeyByEnv: a delivered key whose Deployment takes it as an
// environment variable. Its old key goes quiet, but a pod started before the rotation still
// holds it: the grace stays, GraceEvidence names the pod. A Deployment that mounts the Secret as
// a whole volume does not hold the grace (it sees the new key without a restart). Once the pod
// is replaced by one started after the new key was written, the grace ends, the operator woken
// by the pods' changes alone.
func TestGraceWaitsForPodsThatTakeTheKeyByEnv(t *testing.T) {
	kt := newKeyTest(t)
	ensureDefaultServiceAccount(t, kt.ns)
	envApp := map[string]string{"app": "env-consumer"}
	fileApp := map[string]string{"app": "file-consumer"}
	createDeployment(t, kt.ns, "env-consumer", envApp, corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app",
		Env: []corev1.EnvVar{{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app-key"}, Key: keysecret.DataKey}}}}}}})
	createDeployment(t, kt.ns, "file-consumer", fileApp, corev1.PodSpec{
		Volumes:    []corev1.Volume{{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app-key"}}}},
		Containers: []corev1.Container{{Name: "app", Image: "app", VolumeMounts: []corev1.VolumeMount{{Name: "key", MountPath: "/key"}}}}})
	key := kt.waitIssued(kt.create("pods", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.SecretName = "app-key"
		k.Spec.GraceEndsWhenUnusedFor = durationOf(10 * time.Minute)
	}), 1)
	oldPod := createPod(t, kt.ns, "env-consumer-old", envApp)
	createPod(t, kt.ns, "file-consumer-old", fileApp)

	// Pods carry the API server's wall-clock creation time, to the second: the rotation is
	// written a second after them on the operator's clock, which is moved to the wall clock.
	time.Sleep(time.Until(oldPod.CreationTimestamp.Add(time.Second)) + 50*time.Millisecond)
	kt.op.Clock.SetTime(time.Now())
	rotated := kt.rotateWithGrace(key, "r1", 24*time.Hour, 2)

	kt.op.Clock.Step(11 * time.Minute) // the old key unused for the quiet period
	got := kt.graceEvidence(key, metav1.ConditionFalse, switchboardv1alpha1.ReasonPodsHoldPreviousKey)
	cond, _ := condition(got.Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence)
	if want := "env-consumer-old (deployment/env-consumer)"; !strings.Contains(cond.Message, want) {
		t.Fatalf("GraceEvidence %q does not name %s", cond.Message, want)
	}
	if strings.Contains(cond.Message, "file-consumer") {
		t.Fatalf("GraceEvidence %q names a pod that mounts the Secret as a volume", cond.Message)
	}
	if got.Status.PreviousKeyValidUntil == nil {
		t.Fatal("the grace ended while a pod started before the rotation takes the key by env")
	}

	// The rollout: the old pod goes, a new one starts after the new key was written. First the
	// reconcile that the status write above sets off runs out, so that only the pods' changes
	// can wake the operator.
	kt.quiet(key)
	if err := env.Client.Delete(testCtx(t), oldPod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	written := rotated.Status.KeyIssuedAt.Time
	time.Sleep(time.Until(written.Add(time.Second)) + 50*time.Millisecond)
	createPod(t, kt.ns, "env-consumer-new", envApp)
	// No poke: the operator watches the pods of the namespace while the key waits on them
	// (internal/controller/apikey/podwatch), and would otherwise look again only every 10 minutes.
	kt.waitFor(key, "GraceEvidence ConsumersMoved, woken by the pods' changes", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence, metav1.ConditionTrue, switchboardv1alpha1.ReasonConsumersMoved)
	})
	kt.waitFor(key, "the old key's grace over", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.PreviousKeyValidUntil != nil {
			return fmt.Errorf("previousKeyValidUntil %v", k.Status.PreviousKeyValidUntil)
		}
		return nil
	})
}

// quiet waits until the APIKey has not changed for a second: the reconciles its last writes
// set off have run.
func (kt *keyTest) quiet(key *switchboardv1alpha1.APIKey) {
	kt.t.Helper()
	rv, since := kt.get(key).ResourceVersion, time.Now()
	for time.Since(since) < time.Second {
		time.Sleep(100 * time.Millisecond)
		if now := kt.get(key).ResourceVersion; now != rv {
			rv, since = now, time.Now()
		}
	}
}

// ensureDefaultServiceAccount creates ns's default ServiceAccount, which envtest has no
// controller to create and pods are admitted against.
func ensureDefaultServiceAccount(t *testing.T, ns string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	if err := env.Client.Create(testCtx(t), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func createDeployment(t *testing.T, ns, name string, labels map[string]string, spec corev1.PodSpec) {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if err := env.Client.Create(testCtx(t), d); err != nil {
		t.Fatal(err)
	}
}

// createPod creates a pod of the workload labelled labels (envtest runs no controller that
// would): only its labels and creation time matter to the operator.
func createPod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}, AutomountServiceAccountToken: new(bool)},
	}
	if err := env.Client.Create(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	return p
}
