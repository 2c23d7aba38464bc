package readiness

import (
	"strings"
	"testing"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate/keystatetest"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/leak"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// TestLeakFindingHeld: a refused current key whose replacement is held says so, with when, in
// Leaked (ReplacementHeld) and Ready; once replaced, Replaced. What the report said comes from
// the record, so a deleted report changes nothing.
func TestLeakFindingHeld(t *testing.T) {
	s := keystatetest.Delivered(nil)
	until := keystatetest.Now.Add(3 * time.Minute)
	keysecret.SetLeaked(s.Hash, keysecret.Leak{Hash: string(s.Hash.Data[keysecret.DataHash]), Generation: 2, At: keystatetest.Now,
		ReplaceAfter: until, Hint: "sb_live_abc…xyz", Source: switchboardv1alpha1.LeakSourceGitHubPartner, URL: "https://example.com/leak"})
	f := leak.FindingOf(s)
	if f == nil || !f.HeldUntil.Equal(until) || f.Replaced {
		t.Fatalf("leak.FindingOf = %+v", f)
	}
	SetConditions(s.Key, &Findings{Leak: f, Hash: keystate.HashFound}, "sys")
	leaked := objstatus.ConditionReason(s.Key.Status.Conditions, switchboardv1alpha1.ConditionLeaked)
	ready := objstatus.ConditionReason(s.Key.Status.Conditions, switchboardv1alpha1.ConditionReady)
	if leaked != switchboardv1alpha1.ReasonLeakReplacementHeld || ready != switchboardv1alpha1.ReasonLeaked {
		t.Fatalf("Leaked %s, Ready %s", leaked, ready)
	}
	stamp := until.UTC().Format(time.RFC3339)
	for _, c := range s.Key.Status.Conditions {
		if (c.Type == switchboardv1alpha1.ConditionLeaked || c.Type == switchboardv1alpha1.ConditionReady) && !strings.Contains(c.Message, stamp) {
			t.Errorf("%s says %q, not when the replacement comes (%s)", c.Type, c.Message, stamp)
		}
	}
	if msg := f.Message(s.Key); !strings.Contains(msg, "sb_live_abc…xyz") || !strings.Contains(msg, "https://example.com/leak") || !strings.Contains(msg, "GitHubPartner") {
		t.Errorf("the message %q does not say what the record keeps of the report", msg)
	}

	s.Now = until
	if f := leak.FindingOf(s); !f.HeldUntil.IsZero() {
		t.Fatalf("held at its end: %+v", f)
	}
}
