package plugin

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestHistoryOf: the history shown is the copy controlled by this APIKey; one left by a deleted
// APIKey of the same name (until the garbage collector takes it) or none says nothing.
func TestHistoryOf(t *testing.T) {
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "ci", UID: "now"}}
	copyOf := func(uid types.UID) *switchboardv1alpha1.APIKeyHistory {
		h := &switchboardv1alpha1.APIKeyHistory{Spec: switchboardv1alpha1.APIKeyHistorySpec{Dropped: 3, Events: []switchboardv1alpha1.KeyHistoryEvent{
			{Type: "apikey.created", KeyGeneration: 1, KeyHint: "sb_live_AbCd…wxyz", Time: metav1.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)), Message: "issued\nkey"}}}}
		if uid != "" {
			h.OwnerReferences = []metav1.OwnerReference{{Kind: "APIKey", Name: "ci", UID: uid, Controller: ptrTo(true)}}
		}
		return h
	}
	for _, tc := range []struct {
		name       string
		h          *switchboardv1alpha1.APIKeyHistory
		wantEvents int
	}{
		{"its own", copyOf("now"), 1},
		{"a deleted namesake's", copyOf("before"), 0},
		{"none", &switchboardv1alpha1.APIKeyHistory{}, 0},
		{"not controlled", copyOf(""), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := historyOf(key, tc.h); len(r.Events) != tc.wantEvents || r.Name != "ci" || r.Namespace != "team" {
				t.Errorf("%+v", r)
			}
		})
	}
	var out strings.Builder
	if err := printKeyHistory(&out, historyOf(key, copyOf("now"))); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(3 older events dropped)", "2026-11-27T12:00:00Z", "created", "sb_live_AbCd…wxyz", "issued key"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed %q, lacks %q", out.String(), want)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
