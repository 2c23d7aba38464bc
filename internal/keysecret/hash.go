package keysecret

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// Hashes is what a hash Secret says: which APIKey it belongs to and which key hashes it accepts.
type Hashes struct {
	// UID is the UID of the APIKey.
	UID types.UID
	// Generation is the key generation of Current (0 when the label is missing).
	Generation int64
	// Current is the hash of the current key.
	Current apikey.Hash
	// HasPrevious says whether the key replaced by the last rotation is still accepted.
	HasPrevious bool
	// Previous is the hash of that key, valid until PreviousValidUntil.
	Previous apikey.Hash
	// PreviousValidUntil is when Previous stops being accepted.
	PreviousValidUntil time.Time
	// NotAfter is when Current stops being accepted (its lifetime's end, or the end of a
	// leaked key's overlap if sooner); zero: never.
	NotAfter time.Time
	// Revoked says the operator revoked the key (DataRevokedAt): no hash of the Secret is
	// accepted any more.
	Revoked bool
	// CurrentLeaked says Current was reported leaked (DataLeakedHash) with no overlap
	// (DataLeakedAcceptedUntil): it is refused while its replacement is being issued.
	CurrentLeaked bool
	// Leaked is the hash of the APIKey's last key reported leaked (DataLeakedHash), which the
	// operator has acted on; zero when none is recorded or the record does not parse. It
	// authenticates nothing: it tells the leak receiver that a report of it was recorded.
	Leaked apikey.Hash
	// Binding is the binding the key is held to (DataBinding); nil for a bearer key.
	Binding *Binding
}

// ParseHash reads a hash Secret strictly: anything it does not fully understand is an error,
// because a half-understood hash Secret must not authenticate anything. A previous hash equal
// to the current one is dropped.
func ParseHash(s *corev1.Secret) (Hashes, error) {
	if s.Type != TypeHash {
		return Hashes{}, fmt.Errorf("hash Secret %s has type %q, want %q", s.Name, s.Type, TypeHash)
	}
	h := Hashes{UID: types.UID(s.Labels[LabelAPIKeyUID]), Generation: Generation(s)}
	if h.UID == "" {
		return Hashes{}, fmt.Errorf("hash Secret %s has no %s label", s.Name, LabelAPIKeyUID)
	}
	if s.Name != HashName(h.UID) {
		return Hashes{}, fmt.Errorf("hash Secret %s is labelled for APIKey UID %s, whose hash Secret is %s", s.Name, h.UID, HashName(h.UID))
	}
	var err error
	if h.Current, err = apikey.ParseHash(string(s.Data[DataHash])); err != nil {
		return Hashes{}, fmt.Errorf("hash Secret %s: %s: %w", s.Name, DataHash, err)
	}
	if raw := s.Data[DataNotAfter]; len(raw) > 0 {
		if h.NotAfter, err = time.Parse(time.RFC3339, string(raw)); err != nil {
			return Hashes{}, fmt.Errorf("hash Secret %s: %s: %w", s.Name, DataNotAfter, err)
		}
	}
	if raw := s.Data[DataBinding]; len(raw) > 0 {
		if h.Binding, err = ParseBinding(raw); err != nil {
			return Hashes{}, fmt.Errorf("hash Secret %s: %w", s.Name, err)
		}
	}
	// Any value, even one that does not parse, revokes: a revocation is never half-understood.
	h.Revoked = len(s.Data[DataRevokedAt]) > 0
	leaked := string(s.Data[DataLeakedHash])
	if l, err := apikey.ParseHash(leaked); err == nil {
		h.Leaked = l
	}
	// A leaked key with an overlap (spec.leakOverlap) is accepted until the instant recorded,
	// never later; without one, or with one that does not parse, it is refused now.
	overlap, overlapErr := time.Parse(time.RFC3339, string(s.Data[DataLeakedAcceptedUntil]))
	overlapping := leaked != "" && overlapErr == nil
	h.CurrentLeaked = leaked != "" && leaked == h.Current.String() && !overlapping
	if leaked != "" && leaked == h.Current.String() && overlapping && (h.NotAfter.IsZero() || overlap.Before(h.NotAfter)) {
		h.NotAfter = overlap
	}
	prev := s.Data[DataPreviousHash]
	if len(prev) == 0 {
		return h, nil
	}
	if h.Previous, err = apikey.ParseHash(string(prev)); err != nil {
		return Hashes{}, fmt.Errorf("hash Secret %s: %s: %w", s.Name, DataPreviousHash, err)
	}
	if h.PreviousValidUntil, err = time.Parse(time.RFC3339, string(s.Data[DataPreviousValidUntil])); err != nil {
		return Hashes{}, fmt.Errorf("hash Secret %s: %s: %w", s.Name, DataPreviousValidUntil, err)
	}
	previousLeaked := h.Previous.String() == leaked
	h.HasPrevious = h.Previous != h.Current && (!previousLeaked || overlapping)
	if h.HasPrevious && previousLeaked && overlap.Before(h.PreviousValidUntil) {
		h.PreviousValidUntil = overlap
	}
	if !h.HasPrevious {
		h.Previous, h.PreviousValidUntil = apikey.Hash{}, time.Time{}
	}
	return h, nil
}

// NewHash returns the hash Secret, in namespace, of key generation gen of key, whose hash is sum.
func NewHash(key *switchboardv1alpha1.APIKey, namespace string, gen int64, sum apikey.Hash) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: HashName(key.UID)},
		Type:       TypeHash,
	}
	SetCurrent(s, key, gen, sum, time.Time{})
	return s
}

// SetCurrent makes hash Secret s hash sum as key generation gen of key. When s hashed an older
// generation, its hash becomes the previous key's until keepPreviousUntil (zero: not kept), and
// an older previous key is dropped.
func SetCurrent(s *corev1.Secret, key *switchboardv1alpha1.APIKey, gen int64, sum apikey.Hash, keepPreviousUntil time.Time) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if Generation(s) < gen {
		old := s.Data[DataHash]
		DropPrevious(s)
		delete(s.Data, DataPreviousEndedEarly) // the generation before's
		if !keepPreviousUntil.IsZero() && len(old) > 0 {
			s.Data[DataPreviousHash] = old
			s.Data[DataPreviousValidUntil] = []byte(keepPreviousUntil.UTC().Format(time.RFC3339))
		}
	}
	s.Data[DataHash] = []byte(sum.String())
	s.Labels = labelsFor(key, ComponentHash, gen)
	s.Type = TypeHash
}

// Issued is the operator's record of the key generation a hash Secret hashes: written with the
// hash, in the system namespace that neither tenants nor the server can write, it is what the
// operator decides from (status.keyGeneration, keyHint, lastHandledRotationAt and
// revealExpiresAt only mirror it).
type Issued struct {
	// Generation is the key generation hashed.
	Generation int64
	// Hint is that key's hint.
	Hint string
	// RotationHandled is the spec.rotation.requestedAt that generation carried out ("" if none).
	RotationHandled string
	// RevealExpiresAt is when that key's unclaimed reveal Secret is deleted (zero: the key was
	// delivered, or the record was written before switchboard kept this field).
	RevealExpiresAt time.Time
	// Delivery names the delivery Secret the key was written to ("": it was revealed, or the
	// record was written before switchboard kept this field).
	Delivery string
	// IssuedAt is when the key was issued (zero: the record was written before switchboard
	// kept this field).
	IssuedAt time.Time
	// NotAfter is when the key stops being accepted, its lifetime's end (zero: never).
	NotAfter time.Time
	// Renewal says the generation was issued by an automatic renewal.
	Renewal bool
	// PreviousEndedEarly is the evidence that ended the grace of the key this generation
	// replaced before its fixed end ("": it did not); written by EndPreviousEarly, kept by
	// SetIssued unless rec says otherwise, and gone with the next generation's record.
	PreviousEndedEarly string
	// RevokedAt is when the operator revoked the key for a reason of its own (zero: it did
	// not), and RevokedReason that reason (SetRevoked). Final: SetIssued never clears them.
	RevokedAt     time.Time
	RevokedReason string
}

// Revoked says the operator revoked the key of the record (SetRevoked).
func (rec *Issued) Revoked() bool { return !rec.RevokedAt.IsZero() }

// SetIssued records in hash Secret s the issue of its current key: its hint, the rotation it
// carried out, when its unclaimed reveal ends (zero: no reveal) and where it was delivered ("":
// nowhere). SetCurrent records the generation; rec.Generation is not written here, and neither
// is a revocation (SetRevoked), which nothing undoes.
func SetIssued(s *corev1.Secret, rec Issued) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[DataHint] = []byte(rec.Hint)
	s.Data[DataRotationHandled] = []byte(rec.RotationHandled)
	if rec.RevealExpiresAt.IsZero() {
		delete(s.Data, DataRevealExpiresAt)
	} else {
		s.Data[DataRevealExpiresAt] = []byte(rec.RevealExpiresAt.UTC().Format(time.RFC3339))
	}
	if rec.Delivery == "" {
		delete(s.Data, DataDelivery)
	} else {
		s.Data[DataDelivery] = []byte(rec.Delivery)
	}
	setTime(s, DataIssuedAt, rec.IssuedAt)
	setTime(s, DataNotAfter, rec.NotAfter)
	setString(s, DataRenewal, map[bool]string{true: "true"}[rec.Renewal])
	setString(s, DataPreviousEndedEarly, rec.PreviousEndedEarly)
}

// setString writes v under name, or removes name when v is "".
func setString(s *corev1.Secret, name, v string) {
	if v == "" {
		delete(s.Data, name)
		return
	}
	s.Data[name] = []byte(v)
}

// setTime writes t under name, or removes name when t is zero.
func setTime(s *corev1.Secret, name string, t time.Time) {
	if t.IsZero() {
		delete(s.Data, name)
		return
	}
	s.Data[name] = []byte(t.UTC().Format(time.RFC3339))
}

// IssuedOf reads the record of issuance of hash Secret s; false when s has none (it was
// written before switchboard kept one, or it does not hash any generation). A reveal deadline
// that does not parse is read as none.
func IssuedOf(s *corev1.Secret) (Issued, bool) {
	gen := Generation(s)
	hint := string(s.Data[DataHint])
	if gen == 0 || hint == "" {
		return Issued{}, false
	}
	rec := Issued{Generation: gen, Hint: hint, RotationHandled: string(s.Data[DataRotationHandled]), Delivery: string(s.Data[DataDelivery]),
		Renewal: string(s.Data[DataRenewal]) == "true", PreviousEndedEarly: string(s.Data[DataPreviousEndedEarly])}
	if raw := s.Data[DataRevealExpiresAt]; len(raw) > 0 {
		if t, err := time.Parse(time.RFC3339, string(raw)); err == nil {
			rec.RevealExpiresAt = t
		}
	}
	if raw := s.Data[DataIssuedAt]; len(raw) > 0 {
		if t, err := time.Parse(time.RFC3339, string(raw)); err == nil {
			rec.IssuedAt = t
		}
	}
	if raw := s.Data[DataNotAfter]; len(raw) > 0 {
		// One that does not parse makes the server refuse the key (ParseHash): read it as "now".
		t, err := time.Parse(time.RFC3339, string(raw))
		if err != nil {
			t = time.Unix(1, 0)
		}
		rec.NotAfter = t
	}
	if raw := s.Data[DataRevokedAt]; len(raw) > 0 {
		// One that does not parse still revokes (ParseHash): read it as the earliest instant.
		t, err := time.Parse(time.RFC3339, string(raw))
		if err != nil {
			t = time.Unix(1, 0)
		}
		rec.RevokedAt, rec.RevokedReason = t, string(s.Data[DataRevokedReason])
	}
	return rec, true
}

// SetRevoked records in hash Secret s that the operator revoked its key at at, for reason (a
// Ready condition reason), and drops the previous key's hash. A revocation already recorded
// stands as it is: the first one is the one that counts.
func SetRevoked(s *corev1.Secret, at time.Time, reason string) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	DropPrevious(s)
	if len(s.Data[DataRevokedAt]) > 0 {
		return
	}
	s.Data[DataRevokedAt] = []byte(at.UTC().Format(time.RFC3339))
	s.Data[DataRevokedReason] = []byte(reason)
}

// DropPrevious removes the previous key's hash from hash Secret s: its grace period ended.
func DropPrevious(s *corev1.Secret) {
	delete(s.Data, DataPreviousHash)
	delete(s.Data, DataPreviousValidUntil)
}

// EndPreviousEarly removes the previous key's hash from hash Secret s before its grace's fixed
// end, and records why (evidence, a sentence) in the same write.
func EndPreviousEarly(s *corev1.Secret, evidence string) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	DropPrevious(s)
	setString(s, DataPreviousEndedEarly, evidence)
}

// PreviousValidUntil reads when the previous key of hash Secret s stops being accepted; false
// when s keeps no previous key (or its instant does not parse, and so would not be honoured).
func PreviousValidUntil(s *corev1.Secret) (time.Time, bool) {
	if len(s.Data[DataPreviousHash]) == 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, string(s.Data[DataPreviousValidUntil]))
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// ErrNoHash says a hash Secret stores no hash for the key generation asked about: the
// generation was never hashed, or its hash was replaced by a newer one.
var ErrNoHash = errors.New("no hash is stored for this key generation")

// CheckHashed is the hash check: it returns nil when plaintext is the key that hash Secret hash
// stores as the current key of generation gen of the APIKey with this UID. It returns ErrNoHash
// when hash is nil or hashes another generation, and another error when the hash differs or
// hash is not that APIKey's hash Secret. Only a key that passes was issued by switchboard:
// tenants cannot write the system namespace that holds hash Secrets.
func CheckHashed(hash *corev1.Secret, uid types.UID, gen int64, plaintext string) error {
	if hash == nil || Generation(hash) != gen {
		return ErrNoHash
	}
	h, err := ParseHash(hash)
	if err != nil {
		return err
	}
	if h.UID != uid {
		return fmt.Errorf("hash Secret %s belongs to APIKey UID %s, not %s", hash.Name, h.UID, uid)
	}
	sum := apikey.Sum(plaintext)
	if subtle.ConstantTimeCompare(sum[:], h.Current[:]) != 1 {
		return fmt.Errorf("the key does not match the hash stored for key generation %d", gen)
	}
	return nil
}
