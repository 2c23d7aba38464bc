package keysecret

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Leak is the operator's record, in a hash Secret, of the last key of its APIKey reported
// leaked: the API server refuses that hash, and the operator acts on a report of it once.
type Leak struct {
	// Hash is the leaked key's SHA-256 in lower-case hex.
	Hash string
	// At is when the operator refused it.
	At time.Time
	// Generation is the key generation that leaked.
	Generation int64
	// LastUsedAt is when the APIKey was last used before the leak was acted on (zero: unknown).
	LastUsedAt time.Time
	// AcceptedUntil is when the leaked key stops being accepted, its replacement delivered
	// first (spec.leakOverlap); zero: it is refused from At.
	AcceptedUntil time.Time
	// Rollout is what became of the rollout of the workloads reading the delivery Secret:
	// RolloutPending, or what was done; "" when none is asked.
	Rollout string
	// Hint, Source and URL are what the LeakReport said: the leaked key's hint, how it was
	// reported and where it was found ("": not said, or recorded before they were kept).
	Hint, Source, URL string
	// ReplaceAfter is when the leaked current key's replacement may be issued (zero: at once):
	// the APIKey's leaked keys are replaced at most once per minimum interval between renewals.
	ReplaceAfter time.Time
	// LastReplacement is when the APIKey's last leaked key was replaced, or is to be (this
	// leak's, or carried on from an earlier record; zero: none recorded).
	LastReplacement time.Time
}

// RolloutPending is Leak.Rollout while the workloads reading a leaked delivered key's Secret
// are still to be rolled.
const RolloutPending = "pending"

// LeakOf reads the leak record of hash Secret s; false when it has none.
func LeakOf(s *corev1.Secret) (Leak, bool) {
	h := string(s.Data[DataLeakedHash])
	if h == "" {
		return Leak{}, false
	}
	l := Leak{Hash: h}
	l.At, _ = time.Parse(time.RFC3339, string(s.Data[DataLeakedAt]))
	l.Generation, _ = strconv.ParseInt(string(s.Data[DataLeakedGeneration]), 10, 64)
	l.LastUsedAt, _ = time.Parse(time.RFC3339, string(s.Data[DataLeakedLastUsedAt]))
	if raw := s.Data[DataLeakedAcceptedUntil]; len(raw) > 0 {
		// One that does not parse is no overlap: the server refuses the key at once (ParseHash).
		l.AcceptedUntil, _ = time.Parse(time.RFC3339, string(raw))
	}
	l.Rollout = string(s.Data[DataLeakedRollout])
	l.Hint, l.Source, l.URL = string(s.Data[DataLeakedHint]), string(s.Data[DataLeakedSource]), string(s.Data[DataLeakedURL])
	if raw := s.Data[DataLeakedReplaceAfter]; len(raw) > 0 {
		// One that does not parse holds nothing back: the key is refused either way.
		l.ReplaceAfter, _ = time.Parse(time.RFC3339, string(raw))
	}
	l.LastReplacement, _ = time.Parse(time.RFC3339, string(s.Data[DataLeakedLastReplacement]))
	return l, true
}

// SetLeaked records l in hash Secret s, replacing the record of an earlier leak, and drops the
// previous key's hash when it is the one that leaked (its grace ends now, unless l.AcceptedUntil
// keeps it until then). A current hash that leaked stays until its replacement is issued,
// refused by the API server meanwhile, or from l.AcceptedUntil (ParseHash).
func SetLeaked(s *corev1.Secret, l Leak) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if string(s.Data[DataPreviousHash]) == l.Hash && l.AcceptedUntil.IsZero() {
		DropPrevious(s)
	}
	setTime(s, DataLeakedAcceptedUntil, l.AcceptedUntil)
	if l.Rollout == "" {
		delete(s.Data, DataLeakedRollout)
	} else {
		s.Data[DataLeakedRollout] = []byte(l.Rollout)
	}
	s.Data[DataLeakedHash] = []byte(l.Hash)
	setTime(s, DataLeakedAt, l.At)
	s.Data[DataLeakedGeneration] = []byte(strconv.FormatInt(l.Generation, 10))
	setTime(s, DataLeakedLastUsedAt, l.LastUsedAt)
	setString(s, DataLeakedHint, l.Hint)
	setString(s, DataLeakedSource, l.Source)
	setString(s, DataLeakedURL, l.URL)
	setTime(s, DataLeakedReplaceAfter, l.ReplaceAfter)
	setTime(s, DataLeakedLastReplacement, l.LastReplacement)
}

// HashesOf are the hashes hash Secret s knows of, for the index that finds the APIKey of a
// reported hash: the current key's, the previous key's and the last leaked key's.
func HashesOf(s *corev1.Secret) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range []string{DataHash, DataPreviousHash, DataLeakedHash} {
		if h := string(s.Data[k]); h != "" && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}
