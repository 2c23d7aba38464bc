package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason}
}

func TestKeyState(t *testing.T) {
	ready := cond(switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)
	tests := []struct {
		name string
		key  switchboardv1alpha1.APIKey
		want string
	}{
		{name: "no status yet", want: StateIssuing},
		{name: "issued", key: switchboardv1alpha1.APIKey{Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{ready}}}, want: StateActive},
		{name: "revoked in spec wins over a stale Ready", key: switchboardv1alpha1.APIKey{
			Spec:   switchboardv1alpha1.APIKeySpec{Revoked: true},
			Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{ready}},
		}, want: StateRevoked},
		{name: "expiry passed wins over a stale Ready", key: switchboardv1alpha1.APIKey{
			Spec:   switchboardv1alpha1.APIKeySpec{ExpiresAt: at(-time.Second)},
			Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{ready}},
		}, want: StateExpired},
		{name: "expiry ahead", key: switchboardv1alpha1.APIKey{
			Spec:   switchboardv1alpha1.APIKeySpec{ExpiresAt: at(time.Hour)},
			Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{ready}},
		}, want: StateActive},
		{name: "rotation requested, not handled yet", key: switchboardv1alpha1.APIKey{
			Spec:   switchboardv1alpha1.APIKeySpec{Rotation: &switchboardv1alpha1.APIKeyRotation{RequestedAt: "b"}},
			Status: switchboardv1alpha1.APIKeyStatus{LastHandledRotationAt: "a", Conditions: []metav1.Condition{ready}},
		}, want: StateRotating},
		{name: "rotation handled", key: switchboardv1alpha1.APIKey{
			Spec:   switchboardv1alpha1.APIKeySpec{Rotation: &switchboardv1alpha1.APIKeyRotation{RequestedAt: "b"}},
			Status: switchboardv1alpha1.APIKeyStatus{LastHandledRotationAt: "b", Conditions: []metav1.Condition{ready}},
		}, want: StateActive},
		{name: "issuing", key: switchboardv1alpha1.APIKey{Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{
			cond(switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonIssuing),
		}}}, want: switchboardv1alpha1.ReasonIssuing},
		{name: "delivery conflict", key: switchboardv1alpha1.APIKey{Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{
			cond(switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict),
		}}}, want: StateDeliveryConflict},
		{name: "being deleted", key: switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: at(0)}}, want: StateDeleting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keyState(&tt.key, now); got != tt.want {
				t.Fatalf("keyState = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRelativeTimes(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"ago nil", ago(nil, now), "never"},
		{"ago past", ago(at(-5*time.Minute), now), "5m ago"},
		{"until nil", until(nil, now), "never"},
		{"until future", until(at(30*24*time.Hour), now), "in 30d"},
		{"until past", until(at(-2*time.Hour), now), "120m ago"},
		{"age", age(*at(-90 * time.Second), now), "90s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	gr := schema.GroupResource{Group: "switchboard.dev", Resource: "apikeys"}
	create := action{verb: "create", resource: "apikeys.switchboard.dev", kind: "APIKey", namespace: "team-a"}
	get := action{verb: "get", resource: "apikeys.switchboard.dev", kind: "APIKey", namespace: "team-a", name: "ci"}
	tests := []struct {
		name   string
		err    error
		action action
		want   string
		is     error
	}{
		{
			name:   "forbidden names user, verb and resource from the API server",
			err:    apierrors.NewForbidden(gr, "", errors.New(`User "system:serviceaccount:team-a:bot" cannot create resource "apikeys" in API group "switchboard.dev" in the namespace "team-a"`)),
			action: create,
			want:   `forbidden: you (system:serviceaccount:team-a:bot) may not create apikeys.switchboard.dev in namespace "team-a"; ask a cluster administrator for a Role that grants "create" on "apikeys.switchboard.dev"`,
			is:     ErrForbidden,
		},
		{
			name:   "forbidden on a core resource has no group",
			err:    apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "ci-key-1", errors.New(`User "u" cannot delete resource "secrets" in API group "" in the namespace "team-a"`)),
			action: create,
			want:   `forbidden: you (u) may not delete secrets in namespace "team-a"; ask a cluster administrator for a Role that grants "delete" on "secrets"`,
			is:     ErrForbidden,
		},
		{
			name:   "forbidden with an unusual message falls back to the attempted action",
			err:    apierrors.NewForbidden(gr, "", errors.New("denied by webhook")),
			action: create,
			want:   `forbidden: you may not create apikeys.switchboard.dev in namespace "team-a"; ask a cluster administrator for a Role that grants "create" on "apikeys.switchboard.dev"`,
			is:     ErrForbidden,
		},
		{
			name:   "unreachable API server",
			err:    fmt.Errorf("failed to get server groups: %w", &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api?timeout=32s", Err: errors.New("connection refused")}),
			action: get,
			want:   "cannot reach the Kubernetes API server at https://10.0.0.1:6443: connection refused",
		},
		{
			name:   "bad credentials",
			err:    apierrors.NewUnauthorized("Unauthorized"),
			action: get,
			want:   "the Kubernetes API server did not accept your credentials (Unauthorized): check your kubeconfig, or log in again",
		},
		{
			name:   "not found",
			err:    apierrors.NewNotFound(gr, "ci"),
			action: get,
			want:   `APIKey "ci" not found in namespace "team-a"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := explain(tt.err, tt.action)
			if got.Error() != tt.want {
				t.Fatalf("explain =\n  %s\nwant\n  %s", got, tt.want)
			}
			if tt.is != nil && !errors.Is(got, tt.is) {
				t.Fatalf("explain(%v) does not wrap %v", tt.err, tt.is)
			}
		})
	}
}

func TestContainerPort(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "server", Ports: []corev1.ContainerPort{{Name: "api", ContainerPort: 8080}, {Name: "panel", ContainerPort: 8443}},
	}}}}
	tests := []struct {
		name    string
		port    corev1.ServicePort
		want    int32
		wantErr string
	}{
		{name: "numeric targetPort", port: corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(9000)}, want: 9000},
		{name: "named targetPort", port: corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("panel")}, want: 8443},
		{name: "no targetPort means the service port", port: corev1.ServicePort{Port: 8081}, want: 8081},
		{name: "unknown name", port: corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("web")}, wantErr: `no container port named "web"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := containerPort(pod, tt.port)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("containerPort = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestPanelPort(t *testing.T) {
	tests := []struct {
		name  string
		ports []corev1.ServicePort
		want  string
	}{
		{name: "named http wins", ports: []corev1.ServicePort{{Name: "metrics", Port: 1}, {Name: "http", Port: 2}}, want: "http"},
		{name: "otherwise the first", ports: []corev1.ServicePort{{Name: "a", Port: 1}, {Name: "b", Port: 2}}, want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := panelPort(&corev1.Service{Spec: corev1.ServiceSpec{Ports: tt.ports}})
			if err != nil || got.Name != tt.want {
				t.Fatalf("panelPort = %q, %v; want %q", got.Name, err, tt.want)
			}
		})
	}
	if _, err := panelPort(&corev1.Service{}); err == nil {
		t.Fatal("a Service without ports was accepted")
	}
}

func TestBuildValidatesFlags(t *testing.T) {
	base := func() *keyCreateOptions {
		return &keyCreateOptions{Options: &Options{Clock: clocktesting.NewFakePassiveClock(now)}, timeout: time.Minute}
	}
	tests := []struct {
		name    string
		change  func(*keyCreateOptions)
		wantErr string
		check   func(*testing.T, *switchboardv1alpha1.APIKey)
	}{
		{name: "expires-in", change: func(o *keyCreateOptions) { o.expiresIn = 720 * time.Hour }, check: func(t *testing.T, k *switchboardv1alpha1.APIKey) {
			if !k.Spec.ExpiresAt.Time.Equal(now.Add(720 * time.Hour)) {
				t.Fatalf("expiresAt = %v", k.Spec.ExpiresAt)
			}
		}},
		{name: "expires-at", change: func(o *keyCreateOptions) { o.expiresAt = "2027-01-31T00:00:00Z" }, check: func(t *testing.T, k *switchboardv1alpha1.APIKey) {
			if k.Spec.ExpiresAt.UTC().Format(time.RFC3339) != "2027-01-31T00:00:00Z" {
				t.Fatalf("expiresAt = %v", k.Spec.ExpiresAt)
			}
		}},
		{name: "selector", change: func(o *keyCreateOptions) { o.selector = "team=data,env!=prod,tier in (a,b),!legacy" }, check: func(t *testing.T, k *switchboardv1alpha1.APIKey) {
			want := &metav1.LabelSelector{
				MatchLabels: map[string]string{"team": "data"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}},
					{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
				},
			}
			// The selector must select what kubectl's would.
			got, err := metav1.LabelSelectorAsSelector(k.Spec.ConnectionSelector)
			if err != nil {
				t.Fatal(err)
			}
			wantSel, _ := metav1.LabelSelectorAsSelector(want)
			if got.String() != wantSel.String() {
				t.Fatalf("connectionSelector = %s, want %s", got, wantSel)
			}
		}},
		{name: "greater-than is not a label selector operator", change: func(o *keyCreateOptions) { o.selector = "size>3" }, wantErr: "not supported"},
		{name: "expires-at in the past", change: func(o *keyCreateOptions) { o.expiresAt = "2020-01-01T00:00:00Z" }, wantErr: "not in the future"},
		{name: "expires-at not a time", change: func(o *keyCreateOptions) { o.expiresAt = "tomorrow" }, wantErr: "RFC 3339"},
		{name: "negative expires-in", change: func(o *keyCreateOptions) { o.expiresIn = -time.Hour }, wantErr: "must be positive"},
		{name: "bad selector", change: func(o *keyCreateOptions) { o.selector = "a==b==c" }, wantErr: "not a label selector"},
		{name: "bad output", change: func(o *keyCreateOptions) { o.output = "yaml" }, wantErr: "unsupported output format"},
		{name: "zero timeout", change: func(o *keyCreateOptions) { o.timeout = 0 }, wantErr: "--timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.change(o)
			k, err := o.build("team-a", "ci")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, k)
		})
	}
}

func TestCurrentReveal(t *testing.T) {
	ready := cond(switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)
	revealed := func(reason string) metav1.Condition {
		return cond(switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, reason)
	}
	tests := []struct {
		name   string
		spec   switchboardv1alpha1.APIKeySpec
		status switchboardv1alpha1.APIKeyStatus
		want   revealState
	}{
		{name: "nothing yet", want: revealWaiting},
		{name: "published", status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, RevealSecretName: "ci-key-1", Conditions: []metav1.Condition{ready}}, want: revealClaimable},
		{name: "ready but not published yet", status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready}}, want: revealWaiting},
		{name: "claimed", status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready, revealed(switchboardv1alpha1.ReasonRevealClaimed)}}, want: revealGone},
		{name: "expired", status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready, revealed(switchboardv1alpha1.ReasonRevealExpired)}}, want: revealGone},
		{name: "delivered", spec: switchboardv1alpha1.APIKeySpec{SecretName: "s"}, status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready, revealed(switchboardv1alpha1.ReasonDelivered)}}, want: revealDelivered},
		{name: "delivery pending", spec: switchboardv1alpha1.APIKeySpec{SecretName: "s"}, status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready}}, want: revealWaiting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &switchboardv1alpha1.APIKey{Spec: tt.spec, Status: tt.status}
			if got := currentReveal(k); got != tt.want {
				t.Fatalf("currentReveal = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestWaitTimesOutClearly uses a fake client on purpose: it plays an operator that never
// answers, which the real control plane of the other tests (whose operator runs) cannot.
func TestWaitTimesOutClearly(t *testing.T) {
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(key).Build()
	start := time.Now()
	_, err := waitForKey(context.Background(), c, client.ObjectKeyFromObject(key), 300*time.Millisecond, "published the key",
		func(*switchboardv1alpha1.APIKey) (bool, error) { return false, nil })
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrTimeout", err)
	}
	for _, want := range []string{"after 300ms", `APIKey "ci"`, "operator may not be running", "no status yet"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("timeout message %q lacks %q", err, want)
		}
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the wait ignored its timeout")
	}
}

func TestWaitStopsAtRefusal(t *testing.T) {
	key := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci"},
		Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{{
			Type: switchboardv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: switchboardv1alpha1.ReasonDeliveryConflict, Message: `Secret "db" is not managed by switchboard`,
		}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(key).Build()
	_, err := waitForKey(context.Background(), c, client.ObjectKeyFromObject(key), time.Minute, "published the key",
		func(k *switchboardv1alpha1.APIKey) (bool, error) { return false, refusal(k) })
	if err == nil || !strings.Contains(err.Error(), `Secret "db" is not managed by switchboard`) {
		t.Fatalf("error = %v, want the delivery conflict", err)
	}
}

func TestArgumentErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"key", "create"}, "needs exactly one NAME argument, got 0"},
		{[]string{"key", "create", "Bad_Name"}, `"Bad_Name" is not a valid name`},
		{[]string{"key", "create", "ci", "--expires-in", "1h", "--expires-at", "2030-01-01T00:00:00Z"}, "none of the others can be"},
		{[]string{"key", "list", "-o", "wide"}, `unsupported output format "wide"`},
		{[]string{"key", "rotate", "ci", "--grace", "soon"}, `invalid argument "soon"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			// A kubeconfig that does not exist: argument errors must come before any connection.
			args := append([]string{"--kubeconfig", "/nonexistent", "--server", "https://127.0.0.1:1"}, tt.args...)
			var out, errOut strings.Builder
			code := Main(context.Background(), streams(&out, &errOut, ""), nil, args)
			if code == 0 || !strings.Contains(errOut.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want non-zero and %q", code, errOut.String(), tt.want)
			}
			if strings.Count(strings.TrimRight(errOut.String(), "\n"), "\n") != 0 || out.Len() != 0 {
				t.Fatalf("want one line on stderr and nothing on stdout, got stdout %q stderr %q", out.String(), errOut.String())
			}
		})
	}
}
