package keysecret_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

func testKey() *switchboardv1alpha1.APIKey {
	return &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci", UID: "uid-1"},
		Spec: switchboardv1alpha1.APIKeySpec{SecretName: "ci-key"}}
}

func mustGenerate(t *testing.T) string {
	t.Helper()
	k, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNames(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"hash Secret by UID", keysecret.HashName("0f1e"), "apikey-0f1e"},
		{"reveal Secret of generation 1", keysecret.RevealName("ci", 1), "ci-key-1"},
		{"reveal Secret of generation 12", keysecret.RevealName("ci", 12), "ci-key-12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestGeneration(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   int64
	}{
		{"absent", nil, 0},
		{"one", map[string]string{keysecret.LabelGeneration: "1"}, 1},
		{"large", map[string]string{keysecret.LabelGeneration: "9000"}, 9000},
		{"not a number", map[string]string{keysecret.LabelGeneration: "two"}, 0},
		{"negative", map[string]string{keysecret.LabelGeneration: "-3"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}}
			if got := keysecret.Generation(s); got != tt.want {
				t.Fatalf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestParseHash(t *testing.T) {
	current, previous := apikey.Sum("a"), apikey.Sum("b")
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	valid := func() *corev1.Secret {
		s := keysecret.NewHash(testKey(), "system", 1, previous)
		keysecret.SetCurrent(s, testKey(), 2, current, until)
		return s
	}
	tests := []struct {
		name    string
		mutate  func(*corev1.Secret)
		want    keysecret.Hashes
		wantErr string
	}{
		{name: "current and previous", mutate: func(*corev1.Secret) {},
			want: keysecret.Hashes{UID: "uid-1", Generation: 2, Current: current, HasPrevious: true, Previous: previous, PreviousValidUntil: until}},
		{name: "current only", mutate: keysecret.DropPrevious,
			want: keysecret.Hashes{UID: "uid-1", Generation: 2, Current: current}},
		{name: "empty previous means none", mutate: func(s *corev1.Secret) { s.Data[keysecret.DataPreviousHash] = nil },
			want: keysecret.Hashes{UID: "uid-1", Generation: 2, Current: current}},
		{name: "previous equal to current is dropped", mutate: func(s *corev1.Secret) { s.Data[keysecret.DataPreviousHash] = []byte(current.String()) },
			want: keysecret.Hashes{UID: "uid-1", Generation: 2, Current: current}},
		{name: "revoked by the operator", mutate: func(s *corev1.Secret) { keysecret.SetRevoked(s, until, "RevokedWhenUnused") },
			want: keysecret.Hashes{UID: "uid-1", Generation: 2, Current: current, Revoked: true}},
		{name: "a revocation that does not parse still revokes", mutate: func(s *corev1.Secret) { s.Data[keysecret.DataRevokedAt] = []byte("yesterday") },
			want: keysecret.Hashes{UID: "uid-1", Generation: 2, Current: current, HasPrevious: true, Previous: previous, PreviousValidUntil: until, Revoked: true}},
		{name: "wrong type", mutate: func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, wantErr: "has type"},
		{name: "no UID label", mutate: func(s *corev1.Secret) { delete(s.Labels, keysecret.LabelAPIKeyUID) }, wantErr: "no switchboard.dev/apikey-uid label"},
		{name: "UID label of another APIKey", mutate: func(s *corev1.Secret) { s.Labels[keysecret.LabelAPIKeyUID] = "uid-2" }, wantErr: "whose hash Secret is apikey-uid-2"},
		{name: "current not hex", mutate: func(s *corev1.Secret) { s.Data[keysecret.DataHash] = []byte(strings.Repeat("z", 64)) }, wantErr: "sha256"},
		{name: "current missing", mutate: func(s *corev1.Secret) { delete(s.Data, keysecret.DataHash) }, wantErr: "sha256"},
		{name: "previous too short", mutate: func(s *corev1.Secret) { s.Data[keysecret.DataPreviousHash] = []byte("abc") }, wantErr: "previous.sha256"},
		{name: "previous without its deadline", mutate: func(s *corev1.Secret) { delete(s.Data, keysecret.DataPreviousValidUntil) }, wantErr: "previous.validUntil"},
		{name: "deadline not RFC 3339", mutate: func(s *corev1.Secret) { s.Data[keysecret.DataPreviousValidUntil] = []byte("soon") }, wantErr: "previous.validUntil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid()
			tt.mutate(s)
			got, err := keysecret.ParseHash(s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error saying %q, got %v (%+v)", tt.wantErr, err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSetCurrent(t *testing.T) {
	key := testKey()
	one, two, three := apikey.Sum("1"), apikey.Sum("2"), apikey.Sum("3")
	until := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		gen          int64
		sum          apikey.Hash
		keepUntil    time.Time
		wantPrevious string
	}{
		{name: "rotation with grace keeps the old hash", gen: 3, sum: three, keepUntil: until, wantPrevious: two.String()},
		{name: "rotation without grace drops it", gen: 3, sum: three},
		{name: "same generation leaves the previous key alone", gen: 2, sum: two, keepUntil: until, wantPrevious: one.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := keysecret.NewHash(key, "system", 1, one)
			keysecret.SetCurrent(s, key, 2, two, until)
			keysecret.SetCurrent(s, key, tt.gen, tt.sum, tt.keepUntil)
			if got := string(s.Data[keysecret.DataHash]); got != tt.sum.String() {
				t.Fatalf("current hash %s, want %s", got, tt.sum)
			}
			if got := string(s.Data[keysecret.DataPreviousHash]); got != tt.wantPrevious {
				t.Fatalf("previous hash %q, want %q", got, tt.wantPrevious)
			}
			gotUntil, ok := keysecret.PreviousValidUntil(s)
			if ok != (tt.wantPrevious != "") || (ok && !gotUntil.Equal(until)) {
				t.Fatalf("previous valid until %v (%t)", gotUntil, ok)
			}
			if keysecret.Generation(s) != tt.gen || s.Labels[keysecret.LabelAPIKeyNamespace] != "team-a" || s.Type != keysecret.TypeHash {
				t.Fatalf("labels or type wrong: %v %s", s.Labels, s.Type)
			}
		})
	}
}

func TestIssuedOf(t *testing.T) {
	key := testKey()
	deadline := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	recordedUntil := func(hint, handled string, reveal time.Time) *corev1.Secret {
		s := keysecret.NewHash(key, "system", 4, apikey.Sum("4"))
		keysecret.SetIssued(s, keysecret.Issued{Hint: hint, RotationHandled: handled, RevealExpiresAt: reveal})
		return s
	}
	recorded := func(hint, handled string) *corev1.Secret { return recordedUntil(hint, handled, time.Time{}) }
	badDeadline := recordedUntil("sb_live_AbCd…wxyz", "", deadline)
	badDeadline.Data[keysecret.DataRevealExpiresAt] = []byte("tomorrow")
	// A delivered key's record drops the deadline of an earlier reveal.
	redelivered := recordedUntil("sb_live_AbCd…wxyz", "", deadline)
	keysecret.SetIssued(redelivered, keysecret.Issued{Hint: "sb_live_AbCd…wxyz", Delivery: "app-key"})
	noGeneration := recorded("sb_live_AbCd…wxyz", "r1")
	delete(noGeneration.Labels, keysecret.LabelGeneration)
	tests := []struct {
		name   string
		secret *corev1.Secret
		want   keysecret.Issued
		ok     bool
	}{
		{"recorded with a rotation", recorded("sb_live_AbCd…wxyz", "r1"), keysecret.Issued{Generation: 4, Hint: "sb_live_AbCd…wxyz", RotationHandled: "r1"}, true},
		{"recorded without a rotation", recorded("sb_live_AbCd…wxyz", ""), keysecret.Issued{Generation: 4, Hint: "sb_live_AbCd…wxyz"}, true},
		{"recorded with a reveal deadline", recordedUntil("sb_live_AbCd…wxyz", "", deadline.Add(time.Hour/3)), keysecret.Issued{Generation: 4, Hint: "sb_live_AbCd…wxyz", RevealExpiresAt: deadline.Add(time.Hour / 3)}, true},
		{"a reveal deadline that does not parse is none", badDeadline, keysecret.Issued{Generation: 4, Hint: "sb_live_AbCd…wxyz"}, true},
		{"delivered after a reveal", redelivered, keysecret.Issued{Generation: 4, Hint: "sb_live_AbCd…wxyz", Delivery: "app-key"}, true},
		{"written before the record existed", keysecret.NewHash(key, "system", 4, apikey.Sum("4")), keysecret.Issued{}, false},
		{"no generation label", noGeneration, keysecret.Issued{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := keysecret.IssuedOf(tt.secret)
			if !got.RevealExpiresAt.Equal(tt.want.RevealExpiresAt) || got.Generation != tt.want.Generation || got.Hint != tt.want.Hint ||
				got.RotationHandled != tt.want.RotationHandled || got.Delivery != tt.want.Delivery || ok != tt.ok {
				t.Fatalf("IssuedOf = %+v, %t; want %+v, %t", got, ok, tt.want, tt.ok)
			}
		})
	}
	// The record is no part of what the server authenticates against.
	if _, err := keysecret.ParseHash(recorded("sb_live_AbCd…wxyz", "r1")); err != nil {
		t.Fatalf("a hash Secret with a record does not parse: %v", err)
	}
}

// TestSetRevoked: the operator's revocation is recorded once, drops the previous key, and no
// later record of issuance takes it back.
func TestSetRevoked(t *testing.T) {
	key := testKey()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s := keysecret.NewHash(key, "system", 1, apikey.Sum("1"))
	keysecret.SetCurrent(s, key, 2, apikey.Sum("2"), at.Add(time.Hour))
	keysecret.SetIssued(s, keysecret.Issued{Hint: "sb_live_AbCd…wxyz"})
	keysecret.SetRevoked(s, at, "RevokedWhenUnused")
	keysecret.SetRevoked(s, at.Add(time.Hour), "Other")
	keysecret.SetIssued(s, keysecret.Issued{Hint: "sb_live_AbCd…wxyz"})
	rec, ok := keysecret.IssuedOf(s)
	if !ok || !rec.Revoked() || !rec.RevokedAt.Equal(at) || rec.RevokedReason != "RevokedWhenUnused" {
		t.Fatalf("IssuedOf = %+v, %t; want revoked at %s for RevokedWhenUnused", rec, ok, at)
	}
	if _, kept := keysecret.PreviousValidUntil(s); kept {
		t.Fatal("the previous key's hash survived the revocation")
	}
	s.Data[keysecret.DataRevokedAt] = []byte("yesterday")
	if rec, _ := keysecret.IssuedOf(s); !rec.Revoked() {
		t.Fatal("a revocation that does not parse was read as none")
	}
}

func TestCheckHashed(t *testing.T) {
	key := testKey()
	plaintext, other := mustGenerate(t), mustGenerate(t)
	hash := keysecret.NewHash(key, "system", 3, apikey.Sum(plaintext))
	tests := []struct {
		name      string
		hash      *corev1.Secret
		uid       types.UID
		gen       int64
		plaintext string
		wantErr   error
		anyErr    bool
	}{
		{name: "the hashed key of its generation", hash: hash, uid: key.UID, gen: 3, plaintext: plaintext},
		{name: "no hash Secret (crash before the hash was written)", hash: nil, uid: key.UID, gen: 3, plaintext: plaintext, wantErr: keysecret.ErrNoHash},
		{name: "the hash Secret is at an older generation", hash: hash, uid: key.UID, gen: 4, plaintext: plaintext, wantErr: keysecret.ErrNoHash},
		{name: "a planted key", hash: hash, uid: key.UID, gen: 3, plaintext: other, anyErr: true},
		{name: "another APIKey's hash Secret", hash: hash, uid: "uid-2", gen: 3, plaintext: plaintext, anyErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := keysecret.CheckHashed(tt.hash, tt.uid, tt.gen, tt.plaintext)
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("want %v, got %v", tt.wantErr, err)
			case tt.anyErr && (err == nil || errors.Is(err, keysecret.ErrNoHash)):
				t.Fatalf("want a mismatch error, got %v", err)
			case tt.wantErr == nil && !tt.anyErr && err != nil:
				t.Fatalf("want the key accepted, got %v", err)
			}
			if err != nil && strings.Contains(err.Error(), tt.plaintext) {
				t.Fatal("the error contains the key")
			}
		})
	}
}

func TestPlaintext(t *testing.T) {
	good := mustGenerate(t)
	otherPrefix, err := apikey.Generate("acme")
	if err != nil {
		t.Fatal(err)
	}
	broken := good[:len(good)-1] + "x"
	if broken == good {
		broken = good[:len(good)-1] + "y"
	}
	tests := []struct {
		name    string
		value   string
		prefix  string
		wantErr bool
	}{
		{name: "a key with the prefix", value: good, prefix: apikey.DefaultPrefix},
		{name: "any prefix when none is given", value: otherPrefix, prefix: ""},
		{name: "empty", value: "", prefix: apikey.DefaultPrefix, wantErr: true},
		{name: "another prefix", value: otherPrefix, prefix: apikey.DefaultPrefix, wantErr: true},
		{name: "bad checksum", value: broken, prefix: apikey.DefaultPrefix, wantErr: true},
		{name: "not a key at all, any prefix", value: "hunter2", prefix: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "s"},
				Data: map[string][]byte{keysecret.DataKey: []byte(tt.value)}}
			got, err := keysecret.Plaintext(s, tt.prefix)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("accepted %q", tt.value)
				}
				if tt.value != "" && strings.Contains(err.Error(), tt.value) {
					t.Fatal("the error contains the value")
				}
				return
			}
			if err != nil || got != tt.value {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
}

func TestIsOwnedBy(t *testing.T) {
	key := testKey()
	plaintext := mustGenerate(t)
	tests := []struct {
		name      string
		secret    func() *corev1.Secret
		component string
		want      bool
	}{
		{name: "its reveal Secret", secret: func() *corev1.Secret { return keysecret.NewReveal(key, 1, plaintext) }, component: keysecret.ComponentReveal, want: true},
		{name: "its delivery Secret", secret: func() *corev1.Secret { return keysecret.NewDelivery(key, 1, plaintext) }, component: keysecret.ComponentDelivery, want: true},
		{name: "a reveal Secret is not a delivery Secret", secret: func() *corev1.Secret { return keysecret.NewReveal(key, 1, plaintext) }, component: keysecret.ComponentDelivery},
		{name: "a delivery Secret is not a reveal Secret", secret: func() *corev1.Secret { return keysecret.NewDelivery(key, 1, plaintext) }, component: keysecret.ComponentReveal},
		{name: "labels and type but no owner reference", secret: func() *corev1.Secret {
			s := keysecret.NewReveal(key, 1, plaintext)
			s.OwnerReferences = nil
			return s
		}, component: keysecret.ComponentReveal},
		{name: "owned but not controlled", secret: func() *corev1.Secret {
			s := keysecret.NewReveal(key, 1, plaintext)
			s.OwnerReferences[0].Controller = nil
			return s
		}, component: keysecret.ComponentReveal},
		{name: "controlled by a namesake APIKey (another UID)", secret: func() *corev1.Secret {
			other := testKey()
			other.UID = "uid-2"
			return keysecret.NewReveal(other, 1, plaintext)
		}, component: keysecret.ComponentReveal},
		{name: "controlled by another kind with the same UID", secret: func() *corev1.Secret {
			s := keysecret.NewReveal(key, 1, plaintext)
			s.OwnerReferences[0].Kind = "ConfigMap"
			s.OwnerReferences[0].APIVersion = "v1"
			return s
		}, component: keysecret.ComponentReveal},
		{name: "an Opaque Secret with reveal labels", secret: func() *corev1.Secret {
			s := keysecret.NewReveal(key, 1, plaintext)
			s.Type = corev1.SecretTypeOpaque
			return s
		}, component: keysecret.ComponentReveal},
		{name: "a hash component is never owned this way", secret: func() *corev1.Secret { return keysecret.NewHash(key, "team-a", 1, apikey.Sum(plaintext)) }, component: keysecret.ComponentHash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keysecret.IsOwnedBy(tt.secret(), key, tt.component); got != tt.want {
				t.Fatalf("got %t, want %t", got, tt.want)
			}
		})
	}
}

func TestNewSecrets(t *testing.T) {
	key := testKey()
	plaintext := mustGenerate(t)
	reveal := keysecret.NewReveal(key, 2, plaintext)
	if reveal.Immutable == nil || !*reveal.Immutable {
		t.Fatal("a reveal Secret must be immutable")
	}
	if reveal.Name != "ci-key-2" || reveal.Namespace != "team-a" || keysecret.Generation(reveal) != 2 {
		t.Fatalf("reveal Secret %s/%s generation %d", reveal.Namespace, reveal.Name, keysecret.Generation(reveal))
	}
	delivery := keysecret.NewDelivery(key, 2, plaintext)
	if delivery.Name != "ci-key" || delivery.Type != corev1.SecretTypeOpaque {
		t.Fatalf("delivery Secret %s of type %s", delivery.Name, delivery.Type)
	}
	for _, s := range []*corev1.Secret{reveal, delivery} {
		got, err := keysecret.Plaintext(s, apikey.DefaultPrefix)
		if err != nil || got != plaintext {
			t.Fatalf("%s does not hold the key: %v", s.Name, err)
		}
		if keysecret.Hint(s) != apikey.Hint(plaintext) {
			t.Fatalf("%s hint %q", s.Name, keysecret.Hint(s))
		}
		for k, v := range s.Labels {
			if strings.Contains(v, plaintext) || strings.Contains(k, plaintext) {
				t.Fatal("a label contains the key")
			}
		}
	}
}

// TestRecordOfRenewalAndEarlyEnd: a renewal and an early end of the previous key's grace are
// read back from the record as written; a later record that keeps them (issuedRecord, as
// recordLife does) keeps them; the next generation's record starts without either.
func TestRecordOfRenewalAndEarlyEnd(t *testing.T) {
	key := testKey()
	until := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := keysecret.NewHash(key, "system", 1, apikey.Sum("1"))
	keysecret.SetCurrent(s, key, 2, apikey.Sum("2"), until)
	keysecret.SetIssued(s, keysecret.Issued{Hint: "sb_live_AbCd…wxyz", Renewal: true})
	keysecret.EndPreviousEarly(s, "its consumers moved")
	if _, kept := keysecret.PreviousValidUntil(s); kept {
		t.Fatal("the previous key's hash survived the early end of its grace")
	}
	rec, ok := keysecret.IssuedOf(s)
	if !ok || !rec.Renewal || rec.PreviousEndedEarly != "its consumers moved" {
		t.Fatalf("IssuedOf = %+v, %t; want a renewal whose previous key's grace ended early", rec, ok)
	}
	rec.NotAfter = until
	keysecret.SetIssued(s, rec)
	if again, _ := keysecret.IssuedOf(s); !again.Renewal || again.PreviousEndedEarly != "its consumers moved" {
		t.Fatalf("rewriting the record lost what it said: %+v", again)
	}
	if _, err := keysecret.ParseHash(s); err != nil {
		t.Fatalf("a hash Secret with these records does not parse: %v", err)
	}
	keysecret.SetCurrent(s, key, 3, apikey.Sum("3"), until)
	keysecret.SetIssued(s, keysecret.Issued{Hint: "sb_live_EfGh…wxyz"})
	if next, _ := keysecret.IssuedOf(s); next.Renewal || next.PreviousEndedEarly != "" {
		t.Fatalf("the next generation inherited the record of the one before: %+v", next)
	}
	if _, has := s.Data[keysecret.DataRenewal]; has {
		t.Fatal("a rotation's record still says renewal")
	}
}

// TestParseHashBinding: a hash Secret carries its key's binding, and one whose binding does not
// parse authenticates nothing, rather than a bound key becoming a bearer key.
func TestParseHashBinding(t *testing.T) {
	s := keysecret.NewHash(testKey(), "system", 1, apikey.Sum("1"))
	s.Data[keysecret.DataBinding] = keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}.Encode()
	h, err := keysecret.ParseHash(s)
	if err != nil || h.Binding == nil || h.Binding.Mode != switchboardv1alpha1.BindingEnforce || len(h.Binding.ServiceAccounts) != 1 {
		t.Fatalf("a bound key's hash Secret: %+v, %v", h.Binding, err)
	}
	s.Data[keysecret.DataBinding] = []byte(`{"mode":"Off"}`)
	if _, err := keysecret.ParseHash(s); err == nil {
		t.Error("a hash Secret whose binding does not parse is accepted")
	}
	delete(s.Data, keysecret.DataBinding)
	if h, err := keysecret.ParseHash(s); err != nil || h.Binding != nil {
		t.Errorf("a bearer key's hash Secret: %+v, %v", h.Binding, err)
	}
}
