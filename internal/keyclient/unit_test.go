package keyclient

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason}
}

func TestState(t *testing.T) {
	ready := cond(switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)
	tests := []struct {
		name string
		key  switchboardv1alpha1.APIKey
		want KeyState
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
		}}}, want: KeyState(switchboardv1alpha1.ReasonIssuing)},
		{name: "delivery conflict", key: switchboardv1alpha1.APIKey{Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{
			cond(switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict),
		}}}, want: StateDeliveryConflict},
		{name: "being deleted", key: switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: at(0)}}, want: StateDeleting},
		{name: "revoked by the operator for want of use", key: switchboardv1alpha1.APIKey{Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{
			cond(switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonUnusedRevoked),
		}}}, want: StateRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := State(&tt.key, now); got != tt.want {
				t.Fatalf("State = %q, want %q", got, tt.want)
			}
			if live := Live(&tt.key); live == (tt.want == StateRevoked || tt.want == StateDeleting) {
				t.Fatalf("Live = %t in state %s", live, tt.want)
			}
		})
	}
}

func TestCreatedAt(t *testing.T) {
	tests := []struct {
		name   string
		status switchboardv1alpha1.APIKeyStatus
		want   time.Time
	}{
		{name: "a key was issued: when the first one was", status: switchboardv1alpha1.APIKeyStatus{CreatedAt: at(time.Hour)}, want: now.Add(time.Hour)},
		{name: "none issued yet: when the APIKey was created", want: now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now)}, Status: tt.status}
			if got := CreatedAt(k); !got.Time.Equal(tt.want) {
				t.Errorf("CreatedAt = %v, want %v", got.Time, tt.want)
			}
		})
	}
}

func TestRevealStatus(t *testing.T) {
	ready := cond(switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)
	revealed := func(reason string) metav1.Condition {
		return cond(switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, reason)
	}
	tests := []struct {
		name   string
		spec   switchboardv1alpha1.APIKeySpec
		status switchboardv1alpha1.APIKeyStatus
		want   RevealState
	}{
		{name: "nothing yet", want: RevealWaiting},
		{name: "published", status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, RevealSecretName: "ci-key-1", Conditions: []metav1.Condition{ready}}, want: RevealClaimable},
		{name: "ready but not published yet", status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready}}, want: RevealWaiting},
		{name: "claimed", status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready, revealed(switchboardv1alpha1.ReasonRevealClaimed)}}, want: RevealGone},
		{name: "expired", status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready, revealed(switchboardv1alpha1.ReasonRevealExpired)}}, want: RevealGone},
		{name: "delivered", spec: switchboardv1alpha1.APIKeySpec{SecretName: "s"}, status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready, revealed(switchboardv1alpha1.ReasonDelivered)}}, want: RevealDelivered},
		{name: "delivery pending", spec: switchboardv1alpha1.APIKeySpec{SecretName: "s"}, status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: []metav1.Condition{ready}}, want: RevealWaiting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &switchboardv1alpha1.APIKey{Spec: tt.spec, Status: tt.status}
			if got := RevealStatus(k); got != tt.want {
				t.Fatalf("RevealStatus = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestWaitTimesOutClearly uses a fake client on purpose: it plays an operator that never
// answers, which the real control plane of the other tests (whose operator runs) cannot.
func TestWaitTimesOutClearly(t *testing.T) {
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci"}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(key).Build()
	start := time.Now()
	_, err := New(c, Options{}).wait(context.Background(), client.ObjectKeyFromObject(key), 300*time.Millisecond, "published the key",
		func(*switchboardv1alpha1.APIKey, time.Time) (bool, error) { return false, nil })
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
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci", Generation: 1},
		Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{{
			Type: switchboardv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: 1,
			Reason: switchboardv1alpha1.ReasonDeliveryConflict, Message: `Secret "db" is not managed by switchboard`,
		}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(key).Build()
	_, err := New(c, Options{}).wait(context.Background(), client.ObjectKeyFromObject(key), time.Minute, "published the key", showable)
	if err == nil || !strings.Contains(err.Error(), `Secret "db" is not managed by switchboard`) {
		t.Fatalf("error = %v, want the delivery conflict", err)
	}
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.State != StateDeliveryConflict {
		t.Fatalf("error = %#v, want a *RefusedError in state DeliveryConflict", err)
	}
}

func TestRefusal(t *testing.T) {
	conflict := func(observed int64) []metav1.Condition {
		return []metav1.Condition{{Type: switchboardv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: switchboardv1alpha1.ReasonDeliveryConflict, ObservedGeneration: observed, Message: "taken"}}
	}
	tests := []struct {
		name string
		key  switchboardv1alpha1.APIKey
		want KeyState // "" for no refusal
	}{
		{name: "new key", want: ""},
		{name: "revoked", key: switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{Revoked: true}}, want: StateRevoked},
		{name: "expired by the clock", key: switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{ExpiresAt: at(-time.Minute)}}, want: StateExpired},
		{name: "being deleted", key: switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: at(0)}}, want: StateDeleting},
		{name: "delivery conflict of this spec", key: switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: switchboardv1alpha1.APIKeyStatus{Conditions: conflict(2)}}, want: StateDeliveryConflict},
		{name: "delivery conflict of an older spec is not final", key: switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status: switchboardv1alpha1.APIKeyStatus{Conditions: conflict(2)}}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := refusal(&tt.key, now)
			var refused *RefusedError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refusal = %v, want none", err)
			case tt.want != "" && (!errors.As(err, &refused) || refused.State != tt.want):
				t.Fatalf("refusal = %v, want a refusal in state %s", err, tt.want)
			}
		})
	}
}

func TestNeeds(t *testing.T) {
	tests := []struct {
		op        Operation
		delivered bool
		want      string
	}{
		{OpCreate, false, "create apikeys.switchboard.dev, get apikeys.switchboard.dev, delete apikeys.switchboard.dev, get secrets, delete secrets"},
		{OpCreate, true, "create apikeys.switchboard.dev, get apikeys.switchboard.dev, delete apikeys.switchboard.dev"},
		{OpRotate, false, "get apikeys.switchboard.dev, patch apikeys.switchboard.dev, get secrets, delete secrets"},
		{OpRotate, true, "get apikeys.switchboard.dev, patch apikeys.switchboard.dev"},
		{OpReveal, false, "get apikeys.switchboard.dev, get secrets, delete secrets"},
		{OpRevoke, false, "get apikeys.switchboard.dev, patch apikeys.switchboard.dev"},
		{OpSetPolicy, true, "get apikeys.switchboard.dev, patch apikeys.switchboard.dev"},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			perms := Needs(tt.op, tt.delivered)
			if got := JoinPermissions(perms); got != tt.want {
				t.Fatalf("Needs(%s, delivered=%v) = %s, want %s", tt.op, tt.delivered, got, tt.want)
			}
			for _, p := range perms {
				if p.Purpose == "" {
					t.Errorf("%s has no purpose to name in a refusal", p)
				}
			}
		})
	}
}

// TestCheckNamesEveryMissingPermission uses a fake client that plays an authorizer allowing
// only "get": the real API server's reviews are covered by the envtest tests.
func TestCheckNamesEveryMissingPermission(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			review, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
			if !ok {
				return errors.New("no SelfSubjectReview here")
			}
			review.Status.Allowed = review.Spec.ResourceAttributes.Verb == "get"
			return nil
		},
	}).Build()
	err := New(c, Options{}).Check(context.Background(), "team-a", Needs(OpCreate, false))
	var forbidden *ForbiddenError
	if !errors.As(err, &forbidden) || !errors.Is(err, ErrForbidden) {
		t.Fatalf("Check = %v, want a *ForbiddenError", err)
	}
	if got := JoinPermissions(forbidden.Missing); got != "create apikeys.switchboard.dev, delete apikeys.switchboard.dev, delete secrets" {
		t.Fatalf("missing = %s", got)
	}
	want := `forbidden: you may not create apikeys.switchboard.dev, delete apikeys.switchboard.dev, delete secrets in namespace "team-a" (needed to create the APIKey); nothing was changed`
	if err.Error() != want {
		t.Fatalf("message =\n  %s\nwant\n  %s", err, want)
	}
}

func TestRequestedElsewhere(t *testing.T) {
	rotation := func(at string) *switchboardv1alpha1.APIKeyRotation {
		return &switchboardv1alpha1.APIKeyRotation{RequestedAt: at}
	}
	tests := []struct {
		name     string
		want     string // the RequestedAt asked for; "" for a fresh one
		spec     *switchboardv1alpha1.APIKeyRotation
		handled  string
		refused  bool
		same     bool
		carried  bool
		foundReq string
	}{
		{name: "never rotated: a fresh request is this call's", want: ""},
		{name: "never rotated: a given request is this call's", want: "t1"},
		{name: "last rotation done: a new request is this call's", want: "t2", spec: rotation("t1"), handled: "t1"},
		{name: "the same request carried out already (a reload)", want: "t1", spec: rotation("t1"), handled: "t1",
			refused: true, same: true, carried: true, foundReq: "t1"},
		{name: "the same request pending (a form posted twice)", want: "t1", spec: rotation("t1"), handled: "t0",
			refused: true, same: true, foundReq: "t1"},
		{name: "another request pending", want: "t2", spec: rotation("t1"), handled: "t0", refused: true, foundReq: "t1"},
		{name: "another request pending, fresh request", want: "", spec: rotation("t1"), refused: true, foundReq: "t1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci"},
				Spec: switchboardv1alpha1.APIKeySpec{Rotation: tt.spec}, Status: switchboardv1alpha1.APIKeyStatus{LastHandledRotationAt: tt.handled}}
			err := requestedElsewhere(key, tt.want)
			if !tt.refused {
				if err != nil {
					t.Fatalf("requestedElsewhere = %v, want none", err)
				}
				return
			}
			var e *RequestedElsewhereError
			if !errors.As(err, &e) || !errors.Is(err, ErrRequestedElsewhere) {
				t.Fatalf("requestedElsewhere = %v, want a *RequestedElsewhereError", err)
			}
			if e.Same != tt.same || e.CarriedOut != tt.carried || e.RequestedAt != tt.foundReq || errors.Is(err, ErrAlreadyRotated) != tt.carried {
				t.Fatalf("requestedElsewhere = %+v, want same %v, carried out %v, requestedAt %s", e, tt.same, tt.carried, tt.foundReq)
			}
			if errors.Is(err, ErrAlreadyClaimed) {
				t.Fatal("a request made elsewhere is not a lost claim: nothing was claimed")
			}
		})
	}
}
