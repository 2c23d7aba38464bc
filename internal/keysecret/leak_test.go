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
	for _, tc := range []struct {
		name                       string
		leaked                     apikey.Hash
		currentLeaked, hasPrevious bool
		hashes                     int
	}{
		{"nothing leaked", apikey.Hash{}, false, true, 2},
		{"the current key", cur, true, true, 2},
		{"the previous key", old, false, false, 2},
		{"a key the Secret no longer holds", apikey.Sum("k0"), false, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rotated()
			if tc.leaked != (apikey.Hash{}) {
				keysecret.SetLeaked(s, keysecret.Leak{Hash: tc.leaked.String(), At: at, Generation: 1, LastUsedAt: at.Add(-time.Minute)})
				l, ok := keysecret.LeakOf(s)
				if !ok || l.Hash != tc.leaked.String() || !l.At.Equal(at) || l.Generation != 1 || !l.LastUsedAt.Equal(at.Add(-time.Minute)) {
					t.Fatalf("LeakOf = %+v, %v", l, ok)
				}
			} else if _, ok := keysecret.LeakOf(s); ok {
				t.Fatal("LeakOf found a leak nobody recorded")
			}
			h, err := keysecret.ParseHash(s)
			if err != nil {
				t.Fatal(err)
			}
			if h.CurrentLeaked != tc.currentLeaked || h.HasPrevious != tc.hasPrevious {
				t.Fatalf("CurrentLeaked %v HasPrevious %v, want %v %v", h.CurrentLeaked, h.HasPrevious, tc.currentLeaked, tc.hasPrevious)
			}
			if n := len(keysecret.HashesOf(s)); n != tc.hashes {
				t.Fatalf("HashesOf: %d hashes, want %d", n, tc.hashes)
			}
		})
	}
}
