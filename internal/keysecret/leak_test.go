package keysecret_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestLeakRecord: what a recorded leak does to the hashes the server accepts, and what the
// operator's index finds.
func TestLeakRecord(t *testing.T) {
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "k", UID: "u1"}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old, cur := apikey.Sum("k1"), apikey.Sum("k2")
	rotated := func() *corev1.Secret {
		s := keysecret.NewHash(key, "sys", 1, old)
		keysecret.SetCurrent(s, key, 2, cur, at.Add(time.Hour))
		return s
	}
	overlap := at.Add(30 * time.Second)
	for _, tc := range []struct {
		name                       string
		leaked                     apikey.Hash
		acceptedUntil              time.Time
		currentLeaked, hasPrevious bool
		hashes                     int
		// notAfter and previousUntil: when the server stops accepting the current and the
		// previous key (zero: never, or no previous key).
		notAfter, previousUntil time.Time
	}{
		{"nothing leaked", apikey.Hash{}, time.Time{}, false, true, 2, time.Time{}, at.Add(time.Hour)},
		{"the current key", cur, time.Time{}, true, true, 2, time.Time{}, at.Add(time.Hour)},
		{"the previous key", old, time.Time{}, false, false, 2, time.Time{}, time.Time{}},
		{"a key the Secret no longer holds", apikey.Sum("k0"), time.Time{}, false, true, 3, time.Time{}, at.Add(time.Hour)},
		{"the current key, with an overlap", cur, overlap, false, true, 2, overlap, at.Add(time.Hour)},
		{"the previous key, with an overlap shorter than its grace", old, overlap, false, true, 2, time.Time{}, overlap},
		{"the previous key, with an overlap longer than its grace", old, at.Add(2 * time.Hour), false, true, 2, time.Time{}, at.Add(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rotated()
			if tc.leaked != (apikey.Hash{}) {
				keysecret.SetLeaked(s, keysecret.Leak{Hash: tc.leaked.String(), At: at, Generation: 1, LastUsedAt: at.Add(-time.Minute),
					AcceptedUntil: tc.acceptedUntil, Rollout: keysecret.RolloutPending})
				l, ok := keysecret.LeakOf(s)
				if !ok || l.Hash != tc.leaked.String() || !l.At.Equal(at) || l.Generation != 1 || !l.LastUsedAt.Equal(at.Add(-time.Minute)) ||
					!l.AcceptedUntil.Equal(tc.acceptedUntil) || l.Rollout != keysecret.RolloutPending {
					t.Fatalf("LeakOf = %+v, %v", l, ok)
				}
			} else if _, ok := keysecret.LeakOf(s); ok {
				t.Fatal("LeakOf found a leak nobody recorded")
			}
			h, err := keysecret.ParseHash(s)
			if err != nil {
				t.Fatal(err)
			}
			if h.Leaked != tc.leaked {
				t.Fatalf("Leaked %s, want %s", h.Leaked, tc.leaked)
			}
			if h.CurrentLeaked != tc.currentLeaked || h.HasPrevious != tc.hasPrevious {
				t.Fatalf("CurrentLeaked %v HasPrevious %v, want %v %v", h.CurrentLeaked, h.HasPrevious, tc.currentLeaked, tc.hasPrevious)
			}
			if !h.NotAfter.Equal(tc.notAfter) || !h.PreviousValidUntil.Equal(tc.previousUntil) {
				t.Fatalf("NotAfter %v PreviousValidUntil %v, want %v %v", h.NotAfter, h.PreviousValidUntil, tc.notAfter, tc.previousUntil)
			}
			if n := len(keysecret.HashesOf(s)); n != tc.hashes {
				t.Fatalf("HashesOf: %d hashes, want %d", n, tc.hashes)
			}
		})
	}
}

// TestLeakOverlapThatDoesNotParse: an overlap the server cannot read is no overlap: the leaked
// key, current or previous, is refused at once.
func TestLeakOverlapThatDoesNotParse(t *testing.T) {
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "k", UID: "u1"}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, leaked := range []apikey.Hash{apikey.Sum("k1"), apikey.Sum("k2")} {
		s := keysecret.NewHash(key, "sys", 1, apikey.Sum("k1"))
		keysecret.SetCurrent(s, key, 2, apikey.Sum("k2"), at.Add(time.Hour))
		keysecret.SetLeaked(s, keysecret.Leak{Hash: leaked.String(), At: at, Generation: 1, AcceptedUntil: at.Add(time.Minute)})
		s.Data[keysecret.DataLeakedAcceptedUntil] = []byte("soon")
		h, err := keysecret.ParseHash(s)
		if err != nil {
			t.Fatal(err)
		}
		if accepted := leaked == h.Current && !h.CurrentLeaked || leaked == h.Previous && h.HasPrevious; accepted {
			t.Fatalf("the leaked key %s is accepted with an overlap that does not parse: %+v", leaked, h)
		}
	}
}

// TestLeakRecordKeepsTheReportAndTheReplacements: what the report said and when the APIKey's
// leaked keys are replaced are read back as written, cleared by a record without them (the
// caller carries LastReplacement on), and change nothing of what the server accepts: a
// current key whose replacement is held is refused.
func TestLeakRecordKeepsTheReportAndTheReplacements(t *testing.T) {
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "k", UID: "u1"}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := keysecret.NewHash(key, "sys", 2, apikey.Sum("k2"))
	want := keysecret.Leak{Hash: apikey.Sum("k2").String(), At: at, Generation: 2, Hint: "sb_live_k2…", Source: "GitHubAlert",
		URL: "https://github.com/o/r/blob/1/x", ReplaceAfter: at.Add(5 * time.Minute), LastReplacement: at.Add(5 * time.Minute)}
	keysecret.SetLeaked(s, want)
	got, ok := keysecret.LeakOf(s)
	if !ok || got != want {
		t.Fatalf("LeakOf = %+v, want %+v", got, want)
	}
	if h, err := keysecret.ParseHash(s); err != nil || !h.CurrentLeaked {
		t.Fatalf("a current key whose replacement is held: CurrentLeaked %v (%v), want refused", h.CurrentLeaked, err)
	}
	keysecret.SetLeaked(s, keysecret.Leak{Hash: apikey.Sum("k2").String(), At: at, Generation: 2})
	for _, k := range []string{keysecret.DataLeakedHint, keysecret.DataLeakedSource, keysecret.DataLeakedURL, keysecret.DataLeakedReplaceAfter, keysecret.DataLeakedLastReplacement} {
		if _, there := s.Data[k]; there {
			t.Errorf("%s outlived a record without it", k)
		}
	}
	s.Data[keysecret.DataLeakedReplaceAfter] = []byte("later")
	if l, _ := keysecret.LeakOf(s); !l.ReplaceAfter.IsZero() {
		t.Fatalf("a replaceAfter that does not parse holds the replacement until %v", l.ReplaceAfter)
	}
}
