package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// fakeCluster runs commands against a fake client that plays an operator which never answers,
// or (with publish) one whose reveal Secret somebody else claimed first: states the real
// control plane of the other tests, whose operator runs and whose Secrets nobody races for,
// cannot produce on demand. Every access review is allowed.
func fakeCluster(t *testing.T, publish bool) (client.Client, func(args ...string) result) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithStatusSubresource(&switchboardv1alpha1.APIKey{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, inner client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if review, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
					review.Status.Allowed = true
					return nil
				}
				if err := inner.Create(ctx, obj, opts...); err != nil {
					return err
				}
				if k, ok := obj.(*switchboardv1alpha1.APIKey); ok && publish {
					k.Status = switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, RevealSecretName: k.Name + "-key-1", Conditions: []metav1.Condition{{
						Type: switchboardv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: switchboardv1alpha1.ReasonKeyIssued,
						LastTransitionTime: metav1.Now(),
					}}}
					return inner.Status().Update(ctx, k)
				}
				return nil
			},
		}).Build()
	return c, runner(c, "team-a", clocktesting.NewFakePassiveClock(now))
}

// runner runs commands through c in namespace ns, as Main would after connecting.
func runner(c client.Client, ns string, clk clock.PassiveClock) func(args ...string) result {
	return func(args ...string) result {
		var out, errOut strings.Builder
		o := &Options{IOStreams: streams(&out, &errOut, ""), Flags: genericclioptions.NewConfigFlags(false), Clock: clk}
		o.once.Do(func() { o.client, o.namespace = c, ns })
		cmd := newRootCommand(o)
		cmd.SetArgs(args)
		code := 0
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			fmt.Fprintln(&errOut, "error: "+oneLine(err.Error()))
			code = 1
		}
		return result{stdout: out.String(), stderr: errOut.String(), code: code}
	}
}

func TestCreateTimesOutAndLeavesNothing(t *testing.T) {
	c, run := fakeCluster(t, false)
	r := run("key", "create", "ci", "--timeout", "300ms")
	mustFail(t, r, "timed out waiting for the operator after 300ms")
	mustFail(t, r, "the switchboard operator may not be running")
	mustFail(t, r, `the APIKey "ci" was deleted again`)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "ci"}, &switchboardv1alpha1.APIKey{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the APIKey of a timed-out create is still there: %v", err)
	}
}

func TestCreateClaimedBySomeoneElse(t *testing.T) {
	c, run := fakeCluster(t, true)
	r := run("key", "create", "ci", "--timeout", "10s")
	mustFail(t, r, "already claimed by someone else")
	if r.stdout != "" {
		t.Fatalf("printed %q", r.stdout)
	}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "ci"}, &switchboardv1alpha1.APIKey{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("an APIKey whose key someone else claimed was kept: %v", err)
	}
}

func TestRotateTimeoutSaysHowToGetTheKey(t *testing.T) {
	c, run := fakeCluster(t, false)
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci"}}
	if err := c.Create(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	r := run("key", "rotate", "ci", "--timeout", "300ms")
	mustFail(t, r, "timed out waiting for the operator")
	mustFail(t, r, "`kubectl switchboard key reveal ci` claims it")
	var got switchboardv1alpha1.APIKey
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(key), &got); err != nil || got.Spec.Rotation == nil {
		t.Fatalf("the rotation request was lost: %v %+v", err, got.Spec)
	}
}

func TestBulkRotateRefusesMixtures(t *testing.T) {
	_, run := fakeCluster(t, false)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"ci", "-l", "app=x"}, `key rotate takes a NAME or -l/--all, not both: drop "ci"`},
		{[]string{"ci", "--all"}, `key rotate takes a NAME or -l/--all, not both`},
		{[]string{"-l", "app=x", "--all"}, "key rotate takes -l SELECTOR or --all, not both"},
		{[]string{"ci", "-A"}, "-A/--all-namespaces needs -l SELECTOR or --all"},
		{nil, "key rotate needs a NAME, or -l SELECTOR or --all to rotate several keys"},
		{[]string{"a", "b"}, "key rotate needs exactly one NAME argument, got 2"},
		{[]string{"--all", "-o", "yaml"}, `unsupported output format "yaml"`},
	} {
		mustFail(t, run(append([]string{"key", "rotate"}, tt.args...)...), tt.want)
	}
}

// TestBulkRotateGoesOnAfterAFailure: a key the operator does not rotate in time fails alone;
// the others are still tried, and the command fails at the end with how many failed.
func TestBulkRotateGoesOnAfterAFailure(t *testing.T) {
	c, run := fakeCluster(t, false)
	for _, name := range []string{"a", "b"} {
		if err := c.Create(context.Background(), &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	r := run("key", "rotate", "--all", "--yes", "--timeout", "200ms")
	if r.code == 0 {
		t.Fatalf("succeeded: %+v", r)
	}
	for _, want := range []string{"error: APIKey a: timed out waiting for the operator", "error: APIKey b: timed out waiting for the operator",
		"error: 2 of the 2 APIKeys picked could not be rotated (see above)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, `Rotated 0 of the 2 APIKeys picked in namespace "team-a"; 2 failed.`) {
		t.Errorf("stdout: %q", r.stdout)
	}
}
