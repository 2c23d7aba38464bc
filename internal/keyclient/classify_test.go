package keyclient

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestClassify: every error the plugin and the panel word is classified here, once.
func TestClassify(t *testing.T) {
	keys := schema.GroupResource{Group: "switchboard.dev", Resource: "apikeys"}
	create := Call{Verb: "create", Resource: APIKeys, Namespace: "team-a", Name: "ci"}
	refusal := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "ci-key-1",
		errors.New(`User "system:serviceaccount:team-a:bot" cannot delete resource "secrets" in API group "" in the namespace "team-a"`))
	timeout := &TimeoutError{Namespace: "team-a", Name: "ci"}
	tests := []struct {
		name  string
		err   error
		kind  Kind
		check func(t *testing.T, p Problem)
	}{
		{"an RBAC refusal names who and what, from the API server's message", refusal, KindForbidden, func(t *testing.T, p Problem) {
			if p.User != "system:serviceaccount:team-a:bot" || p.Call.Verb != "delete" || p.Call.Resource.String() != "secrets" || p.Call.Namespace != "team-a" {
				t.Fatalf("%+v", p)
			}
		}},
		{"a check's missing permissions", &ForbiddenError{User: "u", Namespace: "team-b", Missing: []Permission{Secrets.verb("get")}}, KindForbidden, func(t *testing.T, p Problem) {
			if len(p.Missing) != 1 || p.Call.Namespace != "team-b" || p.User != "u" {
				t.Fatalf("%+v", p)
			}
		}},
		{"a workflow call names its own call", &APIError{Permission: APIKeys.verb("patch"), Namespace: "team-c", Name: "k", Err: apierrors.NewNotFound(keys, "k")}, KindNotFound, func(t *testing.T, p Problem) {
			if p.Call.Verb != "patch" || p.Call.Namespace != "team-c" || p.Call.Name != "k" || p.Call.Resource != APIKeys {
				t.Fatalf("%+v", p.Call)
			}
		}},
		{"unauthorized", apierrors.NewUnauthorized("no"), KindUnauthorized, nil},
		{"exists", apierrors.NewAlreadyExists(keys, "ci"), KindAlreadyExists, nil},
		{"invalid, with the API server's explanation", apierrors.NewInvalid(schema.GroupKind{Group: "switchboard.dev", Kind: "APIKey"}, "ci",
			field.ErrorList{field.Invalid(field.NewPath("spec", "rateLimit"), "x", "bad")}), KindInvalid, func(t *testing.T, p Problem) {
			if p.Message == "" {
				t.Fatal("no message")
			}
		}},
		{"conflict", apierrors.NewConflict(keys, "ci", errors.New("changed")), KindConflict, nil},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), KindAPITimeout, nil},
		{"unreachable", &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api?x=1", Err: errors.New("refused")}, KindUnreachable, func(t *testing.T, p Problem) {
			if p.Message != "https://10.0.0.1:6443" || p.NetErr == nil {
				t.Fatalf("%+v", p)
			}
		}},
		{"the operator too slow", timeout, KindOperatorTimeout, func(t *testing.T, p Problem) {
			if p.Timeout != timeout {
				t.Fatal("the TimeoutError is not kept")
			}
		}},
		{"refused", &RefusedError{Name: "ci", State: StateRevoked}, KindRefused, nil},
		{"claims lost, ended by a timeout", &ClaimLostError{Name: "ci", Stolen: []string{"h"}, Next: timeout}, KindClaimLost, func(t *testing.T, p Problem) {
			if p.Cause == nil || p.Cause.Kind != KindOperatorTimeout {
				t.Fatalf("cause %+v", p.Cause)
			}
		}},
		{"already rotated, found as a request carried out", &RequestedElsewhereError{Name: "ci", CarriedOut: true}, KindAlreadyRotated, nil},
		{"requested elsewhere", &RequestedElsewhereError{Name: "ci", Same: true}, KindRequestedElsewhere, nil},
		{"superseded", &SupersededError{Name: "ci"}, KindSuperseded, nil},
		{"claimed, with the other claimer's hint", &ClaimedError{Name: "ci", Hint: "sb_live_ab…yz"}, KindAlreadyClaimed, func(t *testing.T, p Problem) {
			if p.Claimed == nil || p.Claimed.Hint != "sb_live_ab…yz" {
				t.Fatalf("%+v", p.Claimed)
			}
		}},
		{"reveal expired", ErrRevealExpired, KindRevealExpired, nil},
		{"not published", ErrNotPublished, KindNotPublished, nil},
		{"abandoned: the cause and the failed delete, each classified", &AbandonedError{Name: "ci", Cause: timeout, DeleteErr: refusal}, KindAbandoned, func(t *testing.T, p Problem) {
			if p.Cause.Kind != KindOperatorTimeout || p.DeleteCause == nil || p.DeleteCause.Kind != KindForbidden {
				t.Fatalf("cause %+v, delete %+v", p.Cause, p.DeleteCause)
			}
		}},
		{"anything else", errors.New("boom"), KindOther, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Classify(tt.err, create)
			if p.Kind != tt.kind || !errors.Is(tt.err, p.Err) {
				t.Fatalf("Classify = kind %d, err %v; want kind %d", p.Kind, p.Err, tt.kind)
			}
			if tt.check != nil {
				tt.check(t, p)
			}
		})
	}
}
