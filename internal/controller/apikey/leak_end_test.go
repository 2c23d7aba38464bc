//go:build !unit

package apikey_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// A tenant's self-leak loop (issue 39): each key it gets it publishes again. The operator
// refuses every leaked key at once, but replaces an APIKey's leaked keys at most once per
// minimum interval between renewals (5m for a key without a lifetime, the operator's default):
// a second leak within it is refused and its replacement held, said with when, and issued once
// the interval has passed (the operator's clock moved past it). The report of the first key,
// which no hash Secret knows any more, is deleted; the second key's report, seen again,
// replaces nothing.
func TestLeakReplacementsHeldToTheMinimumInterval(t *testing.T) {
	kt := newKeyTest(t)
	interval := renewalinterval.Default.Floor
	key := kt.waitIssued(kt.create("loop", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "loop-key" }), 1)
	first := kt.delivered("loop-key")
	replacedAt := kt.op.Clock.Now().Truncate(time.Second)
	firstReport := kt.report(kt.system, first)
	// The first leak is replaced at once, as it always was.
	kt.waitIssued(key, 2)
	second := kt.delivered("loop-key")
	held := leaksCountedAs(t, switchboardv1alpha1.LeakSourceGitHubPartner, "replacement_held")

	secondReport := kt.report(kt.system, second)
	until := replacedAt.Add(interval).UTC().Format(time.RFC3339)
	got := kt.waitFor(key, "the second leak refused, its replacement held", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakReplacementHeld)
	})
	if !kt.refused(got, second) {
		t.Fatal("the second leaked key is accepted while its replacement is held")
	}
	for _, condType := range []string{switchboardv1alpha1.ConditionLeaked, switchboardv1alpha1.ConditionReady} {
		c, _ := condition(got.Status.Conditions, condType)
		if !strings.Contains(c.Message, until) {
			t.Errorf("%s says %q, not when the replacement comes (%s)", condType, c.Message, until)
		}
	}
	if err := hasCondition(got.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonLeaked); err != nil {
		t.Error(err)
	}
	kt.waitEvent(key, apikeyctrl.ReasonKeyLeaked, "replaced at "+until)
	if n := leaksCountedAs(t, switchboardv1alpha1.LeakSourceGitHubPartner, "replacement_held"); n < held+1 {
		t.Errorf("keys_leaked_total{action=replacement_held} went from %v to %v", held, n)
	}
	// Within the interval nothing is issued, however often the key is looked at.
	kt.op.Clock.Step(interval - time.Second)
	poke(t, key)
	time.Sleep(2 * time.Second)
	if g := kt.get(key).Status.KeyGeneration; g != 2 || kt.delivered("loop-key") != second {
		t.Fatalf("a replacement issued within the minimum interval: generation %d", g)
	}

	// Once it has passed, the held replacement is issued, and the leaked key stays refused.
	kt.op.Clock.Step(time.Second)
	poke(t, key)
	kt.waitIssued(key, 3)
	third := kt.delivered("loop-key")
	got = kt.waitFor(key, "Leaked Replaced", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakReplaced)
	})
	if third == second || kt.refused(got, third) || !kt.refused(got, second) || !kt.refused(got, first) {
		t.Fatalf("after the interval: the replacement refused %v, the leaked keys refused %v %v",
			kt.refused(got, third), kt.refused(got, second), kt.refused(got, first))
	}

	// The first report's key is known to no hash Secret: its report goes, once settled.
	kt.op.Clock.Step(15 * time.Minute)
	touch(t, firstReport)
	kt.waitReportGone(firstReport)

	// The second key's report seen again: nothing more. (The held replacement's issue said so
	// in a KeyLeaked Event of its own, with the rollout it came with.)
	kt.waitEvent(key, apikeyctrl.ReasonKeyLeaked, "it is refused and replaced; the current key is "+got.Status.KeyHint)
	events := len(kt.events(key)[apikeyctrl.ReasonKeyLeaked])
	kt.mustReport(secondReport)
	touch(t, secondReport)
	poke(t, key)
	time.Sleep(2 * time.Second)
	if g := kt.get(key).Status.KeyGeneration; g != 3 || kt.delivered("loop-key") != third {
		t.Fatalf("the same leak reported again replaced the key again: generation %d", g)
	}
	if n := len(kt.events(key)[apikeyctrl.ReasonKeyLeaked]); n != events {
		t.Fatalf("%d KeyLeaked Events, want %d: %v", n, events, kt.events(key)[apikeyctrl.ReasonKeyLeaked])
	}
}

// TestLeakReportsEnd: a LeakReport goes once no hash Secret knows its key (its APIKey deleted;
// ten minutes after it was received, so that an operator's cache behind a key just issued
// loses no report), and one whose key is refused goes after the retention, by the operator's
// clock. The leaked key stays refused (its hash Secret's record, which the server reads), and
// the APIKey still says where it leaked; the key reported again is not replaced again.
func TestLeakReportsEnd(t *testing.T) {
	kt := newKeyTest(t)
	kept := kt.waitIssued(kt.create("kept", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "kept-key" }), 1)
	dropped := kt.waitIssued(kt.create("dropped", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "dropped-key" }), 1)
	keptLeak, droppedLeak := kt.delivered("kept-key"), kt.delivered("dropped-key")
	gone, retained := reportsDeleted(t, "key_gone"), reportsDeleted(t, "retention")
	keptReport, droppedReport := kt.report(kt.system, keptLeak), kt.report(kt.system, droppedLeak)
	kt.waitIssued(kept, 2)
	kt.waitIssued(dropped, 2)
	kt.waitReport(keptReport, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakActedOn)

	if err := env.Client.Delete(testCtx(t), dropped); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted APIKey's hash Secret gone", func() error {
		_, err := kt.hashSecret(dropped)
		switch {
		case err == nil:
			return errors.New("the hash Secret is still there")
		case !apierrors.IsNotFound(err):
			return err
		}
		return nil
	})
	// Its key gone, the report stays while an operator's cache might not have seen that key.
	touch(t, droppedReport)
	time.Sleep(2 * time.Second)
	kt.mustReport(droppedReport)
	kt.op.Clock.Step(15 * time.Minute)
	touch(t, droppedReport)
	touch(t, keptReport)
	kt.waitReportGone(droppedReport)
	// The reconciler counts a deletion after making it: the count may lag the report's going.
	eventually(t, "leak_reports_deleted_total{reason=key_gone} counted", func() error {
		if n := reportsDeleted(t, "key_gone"); n < gone+1 {
			return fmt.Errorf("it went from %v to %v", gone, n)
		}
		return nil
	})
	// The other's key is known, refused: its report stays until the retention.
	kt.mustReport(keptReport)

	kt.op.Clock.Step(configv1alpha1.DefaultLeakReportRetention)
	touch(t, keptReport)
	kt.waitReportGone(keptReport)
	// The reconciler counts a deletion after making it: the count may lag the report's going.
	eventually(t, "leak_reports_deleted_total{reason=retention} counted", func() error {
		if n := reportsDeleted(t, "retention"); n < retained+1 {
			return fmt.Errorf("it went from %v to %v", retained, n)
		}
		return nil
	})
	// The leaked key stays refused: the hash Secret's record says so, and the server refuses it.
	got := kt.get(kept)
	if l, _ := keysecret.LeakOf(kt.mustHash(kept)); l.Hash != apikey.Sum(keptLeak).String() {
		t.Fatalf("the hash Secret's leak record names %q, not the leaked key", l.Hash)
	}
	if !kt.refused(got, keptLeak) {
		t.Fatal("the leaked key is accepted once its report is deleted")
	}
	current := kt.delivered("kept-key")
	poke(t, kept)
	got = kt.waitFor(kept, "Leaked still says where", func(k *switchboardv1alpha1.APIKey) error {
		c, err := condition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked)
		if err != nil {
			return err
		}
		if c.Reason != switchboardv1alpha1.ReasonLeakReplaced || !strings.Contains(c.Message, leakURL) || !strings.Contains(c.Message, apikey.Hint(keptLeak)) {
			return fmt.Errorf("Leaked is %s: %q", c.Reason, c.Message)
		}
		return nil
	})

	// Reported again (its report deleted, the receiver creates it anew): acted on once only.
	again := kt.report(kt.system, keptLeak)
	touch(t, again)
	poke(t, kept)
	time.Sleep(2 * time.Second)
	if g := kt.get(kept).Status.KeyGeneration; g != 2 || kt.delivered("kept-key") != current || kt.refused(got, current) {
		t.Fatalf("the leak reported again after its report's deletion issued generation %d", g)
	}
	if n := len(kt.events(kept)[apikeyctrl.ReasonKeyLeaked]); n != 1 {
		t.Fatalf("%d KeyLeaked Events, want 1", n)
	}
	if !kt.refused(got, keptLeak) {
		t.Fatal("the leaked key is accepted after it was reported again")
	}
}

// touch changes a LeakReport's annotations, so that the operator reconciles it now (its
// spec cannot change; requeues are timed by the real clock, the tests move the fake one).
func touch(t *testing.T, r *switchboardv1alpha1.LeakReport) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"touched":%q}}}`, time.Now().Format(time.RFC3339Nano))
	err := env.Client.Patch(testCtx(t), r.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch)))
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("touching LeakReport %s: %v", r.Name, err)
	}
}

// mustReport fails unless the LeakReport r (this very one, by UID) is there.
func (kt *keyTest) mustReport(r *switchboardv1alpha1.LeakReport) {
	kt.t.Helper()
	got := &switchboardv1alpha1.LeakReport{}
	if err := env.Client.Get(testCtx(kt.t), client.ObjectKeyFromObject(r), got); err != nil || got.UID != r.UID {
		kt.t.Fatalf("LeakReport %s is gone (%v)", r.Name, err)
	}
}

// waitReportGone waits until the LeakReport r (by UID) is deleted.
func (kt *keyTest) waitReportGone(r *switchboardv1alpha1.LeakReport) {
	kt.t.Helper()
	eventually(kt.t, "LeakReport "+r.Name+" deleted", func() error {
		got := &switchboardv1alpha1.LeakReport{}
		err := env.Client.Get(testCtx(kt.t), client.ObjectKeyFromObject(r), got)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case got.UID != r.UID:
			return nil // created anew since
		}
		return fmt.Errorf("still there: %+v", got.Status.Conditions)
	})
}

// reportsDeleted reads switchboard_operator_leak_reports_deleted_total{reason} (tests in
// parallel may add to it: compare before and after).
func reportsDeleted(t *testing.T, reason string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "switchboard_operator_leak_reports_deleted_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
