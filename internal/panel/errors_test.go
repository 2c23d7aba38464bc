package panel

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

func TestDescribe(t *testing.T) {
	keys := schema.GroupResource{Group: "switchboard.dev", Resource: "apikeys"}
	secrets := schema.GroupResource{Resource: "secrets"}
	create := action{Verb: "create", Resource: "apikeys", Group: "switchboard.dev", Namespace: "team-a", Name: "ci"}
	tests := []struct {
		name       string
		err        error
		act        action
		wantStatus int
		wantIn     []string
		signedOut  bool
	}{
		{"forbidden names the permission from the API server's message",
			apierrors.NewForbidden(secrets, "ci-key-1", errors.New(`User "system:serviceaccount:team-a:dev" cannot get resource "secrets" in API group "" in the namespace "team-a"`)),
			action{Verb: "delete", Resource: "secrets", Namespace: "team-a", Name: "ci"},
			http.StatusForbidden, []string{`you may not get secrets in namespace "team-a"`, `granting "get" on secrets`}, false},
		{"forbidden without details falls back to the action",
			apierrors.NewForbidden(keys, "ci", errors.New("no")), create,
			http.StatusForbidden, []string{"you may not create apikeys.switchboard.dev", `"create"`}, false},
		{"wrapped forbidden", fmt.Errorf("claiming: %w", apierrors.NewForbidden(secrets, "x", errors.New("denied"))),
			action{Verb: "get", Resource: "secrets", Namespace: "team-a"}, http.StatusForbidden, []string{"you may not get secrets"}, false},
		{"not found", apierrors.NewNotFound(keys, "ci"), create, http.StatusNotFound, []string{`APIKey "ci" not found in namespace "team-a"`}, false},
		{"already exists", apierrors.NewAlreadyExists(keys, "ci"), create, http.StatusConflict, []string{`already exists`}, false},
		{"token refused ends the session", apierrors.NewUnauthorized("expired"), create, http.StatusUnauthorized, []string{"Sign in again"}, true},
		// On purpose since the key workflow is shared with the plugin: a create whose key cannot be
		// shown deletes its APIKey again (it used to be kept, with a Show key button).
		{"operator timeout at create", &keyclient.AbandonedError{Name: "ci", Namespace: "team-a",
			Cause: &keyclient.TimeoutError{Name: "ci", Namespace: "team-a", After: 30 * time.Second}}, create,
			http.StatusGatewayTimeout, []string{"30s", "operator may not be running", "was deleted again"}, false},
		{"operator timeout at rotation", &keyclient.TimeoutError{Name: "ci", Namespace: "team-a", After: 30 * time.Second}, create,
			http.StatusGatewayTimeout, []string{"30s", "operator may not be running", "rotation stays requested"}, false},
		{"claimed by someone else", keyclient.ErrAlreadyClaimed, create, http.StatusConflict, []string{"already shown", "Rotate"}, false},
		{"the same rotation form posted twice", &keyclient.RequestedElsewhereError{Name: "ci", RequestedAt: "2026-11-23T04:00:00Z", Same: true}, create,
			http.StatusConflict, []string{"already requested by another submission", "nothing was changed", "Show key"}, false},
		{"the same rotation form posted after it was carried out", &keyclient.RequestedElsewhereError{Name: "ci", Same: true, CarriedOut: true}, create,
			http.StatusConflict, []string{"already carried out"}, false},
		{"another rotation pending", &keyclient.RequestedElsewhereError{Name: "ci", RequestedAt: "2026-11-23T04:00:00Z"}, create,
			http.StatusConflict, []string{"Another rotation", "nothing was changed"}, false},
		{"rotation superseded", &keyclient.SupersededError{Name: "ci", RequestedAt: "a", By: "b"}, create,
			http.StatusConflict, []string{"replaced by another request", "Rotate again"}, false},
		{"claimed by someone else at create", &keyclient.AbandonedError{Name: "ci", Namespace: "team-a",
			Cause: &keyclient.ClaimedError{Name: "ci", Hint: "sb_live_AbCd…wxyz"}}, create,
			http.StatusConflict, []string{"Someone else claimed the key", "was deleted again"}, false},
		{"permission check", &keyclient.ForbiddenError{Namespace: "team-a", Missing: keyclient.Needs(keyclient.OpCreate, false)[3:]}, create,
			http.StatusForbidden, []string{`you may not get secrets in namespace "team-a"`, "nothing was changed", `"get" on secrets, "delete" on secrets`}, false},
		{"a workflow call refused", &keyclient.APIError{Permission: keyclient.Needs(keyclient.OpRevoke, false)[1], Namespace: "team-a", Name: "ci",
			Err: apierrors.NewForbidden(keys, "ci", errors.New("no"))}, action{},
			http.StatusForbidden, []string{"you may not patch apikeys.switchboard.dev"}, false},
		{"other", errors.New("connection refused"), create, http.StatusBadGateway, []string{"connection refused"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := describe(tt.err, tt.act)
			if p.Status != tt.wantStatus || p.SignedOut != tt.signedOut {
				t.Fatalf("describe = %+v, want status %d signedOut %v", p, tt.wantStatus, tt.signedOut)
			}
			for _, want := range tt.wantIn {
				if !strings.Contains(p.Message, want) {
					t.Errorf("message %q lacks %q", p.Message, want)
				}
			}
			if strings.Contains(p.Message, "\n") {
				t.Errorf("message is not one line: %q", p.Message)
			}
		})
	}
}
