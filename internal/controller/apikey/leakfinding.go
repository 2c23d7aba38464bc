package apikey

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// What an APIKey says of its last leak (the Leaked condition, Ready, the KeyLeaked Event and
// key event), from the record in its hash Secret: the LeakReport is deleted in time
// (leakreport.go), and what the key says must not change with it.

// leakFinding is what the Leaked condition says: the last leak the hash Secret records.
type leakFinding struct {
	leak     keysecret.Leak
	report   *switchboardv1alpha1.LeakReport
	replaced bool
	// heldUntil is when the refused current key's replacement is issued (zero: it is not
	// held back).
	heldUntil time.Time
}

// leakFindingOf reads the last leak recorded in the hash Secret of s (nil: none).
func leakFindingOf(s *keyState) *leakFinding {
	if s.hash == nil {
		return nil
	}
	l, ok := keysecret.LeakOf(s.hash)
	if !ok {
		return nil
	}
	f := &leakFinding{leak: l, report: s.leaks[l.Hash], replaced: keysecret.Generation(s.hash) > l.Generation}
	if !f.replaced && s.now.Before(l.ReplaceAfter) {
		f.heldUntil = l.ReplaceAfter
	}
	return f
}

// said is what the report said of the leak: the key's hint, its source and where the key was
// found, as the record keeps them, or as the report says for a record written before it kept
// them ("" where neither says).
func (f *leakFinding) said() (hint, source, url string) {
	hint, source, url = f.leak.Hint, f.leak.Source, f.leak.URL
	if r := f.report; r != nil && hint == "" && source == "" && url == "" {
		hint, source, url = r.Spec.KeyHint, r.Spec.Source, r.Spec.URL
	}
	return hint, source, url
}

// message says what leaked where, what was done and when the key was last used: the hint,
// never the key.
func (f *leakFinding) message(key *switchboardv1alpha1.APIKey) string {
	hint, source, where := f.said()
	if source == "" {
		source = "a report"
	}
	if where == "" {
		where = "an unknown place"
	}
	if hint == "" {
		hint = fmt.Sprintf("of generation %d", f.leak.Generation)
	}
	used := "no use recorded"
	if !f.leak.LastUsedAt.IsZero() {
		used = "the APIKey was last used at " + f.leak.LastUsedAt.UTC().Format(time.RFC3339)
	}
	done := "it is refused; no replacement is issued (see Ready)"
	switch {
	case f.replaced && !f.leak.AcceptedUntil.IsZero():
		done = fmt.Sprintf("it is replaced first, by %s, and refused from %s (spec.leakOverlap)",
			key.Status.KeyHint, f.leak.AcceptedUntil.UTC().Format(time.RFC3339))
	case f.replaced:
		done = fmt.Sprintf("it is refused and replaced; the current key is %s", key.Status.KeyHint)
	case !f.heldUntil.IsZero():
		done = fmt.Sprintf("it is refused, and replaced at %s: this APIKey's leaked keys are replaced at most once per "+
			"minimum interval between renewals (--min-renewal-interval), and its last one was replaced less than that before",
			f.heldUntil.UTC().Format(time.RFC3339))
	}
	switch f.leak.Rollout {
	case "":
	case keysecret.RolloutPending:
		done += fmt.Sprintf("; the workloads reading Secret %s are not rolled yet", key.Spec.SecretName)
	default:
		done += fmt.Sprintf("; Secret %s: %s", key.Spec.SecretName, f.leak.Rollout)
	}
	return fmt.Sprintf("key %s was reported leaked by %s at %s, found at %s; %s (%s)",
		hint, source, f.leak.At.UTC().Format(time.RFC3339), where, done, used)
}

// readyMessage is what Ready says of a leaked current key not replaced (yet).
func (f *leakFinding) readyMessage(key *switchboardv1alpha1.APIKey) string {
	if !f.heldUntil.IsZero() {
		return fmt.Sprintf("key %s was reported leaked and is refused; its replacement is held until %s (see Leaked)",
			hintOf(key), f.heldUntil.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("key %s was reported leaked and is refused; no replacement is issued yet", hintOf(key))
}

// setLeakCondition sets Leaked from the last leak the hash Secret records; it is left as it is
// when the hash Secret was not seen.
func setLeakCondition(key *switchboardv1alpha1.APIKey, f *leakFinding) {
	if f == nil {
		return
	}
	reason := switchboardv1alpha1.ReasonLeakRefused
	switch {
	case f.replaced:
		reason = switchboardv1alpha1.ReasonLeakReplaced
	case !f.heldUntil.IsZero():
		reason = switchboardv1alpha1.ReasonLeakReplacementHeld
	}
	controller.SetCondition(&key.Status.Conditions, key.Generation, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, reason, f.message(key))
}
