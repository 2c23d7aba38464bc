package webhookdelivery

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery, as the Standard Webhooks specification names them.
const (
	// HeaderID carries the message's id, the same on every attempt: the receiver's idempotency key.
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the attempt's time in unix seconds, which the receiver checks
	// against its clock to refuse replays.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries one "v1,<base64>" signature per signing secret, space-separated.
	HeaderSignature = "webhook-signature"
)

// SecretPrefix begins a symmetric signing secret in the specification's serialization, so that
// a secret is recognised for what it is wherever it is pasted.
const SecretPrefix = "whsec_"

// Bounds of a secret's decoded key, the specification's: at least 24 bytes, at most 512 bits.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// idPattern is what a message id may be: the specification requires that it contain no "."
// (the signed content is "id.timestamp.body"); letters, digits, "_" and "-" are what ids such
// as "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W" use, and 64 characters leave room for ids derived from
// an object's UID.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Signer signs messages with every secret an endpoint currently has, so that a receiver that
// knows any of them verifies the delivery: a secret is rotated by adding the new one, letting
// the receiver switch, then removing the old one.
type Signer struct {
	keys [][]byte
}

// NewSigner decodes secrets ("whsec_" and the base64 of 24 to 64 random bytes). Its errors
// say which secret (by position) is wrong and how, never what it holds.
func NewSigner(secrets ...string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no signing secret")
	}
	s := &Signer{keys: make([][]byte, 0, len(secrets))}
	for i, secret := range secrets {
		key, err := decodeSecret(secret)
		if err != nil {
			return nil, fmt.Errorf("signing secret %d of %d: %w", i+1, len(secrets), err)
		}
		s.keys = append(s.keys, key)
	}
	return s, nil
}

// decodeSecret returns the key of one secret; its errors contain nothing of the secret.
func decodeSecret(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("does not begin with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("what follows %q is not standard base64", SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, fmt.Errorf("decodes to %d bytes; a secret has %d to %d", len(key), MinSecretBytes, MaxSecretBytes)
	}
	return key, nil
}

// Sign returns the webhook-signature header of the message id sent at t with body: one
// "v1,<base64 HMAC-SHA256 of id.<unix seconds>.body>" per secret, space-separated, in the
// order the secrets were given.
func (s *Signer) Sign(id string, t time.Time, body []byte) string {
	var b strings.Builder
	ts := strconv.FormatInt(t.Unix(), 10)
	for i, key := range s.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return b.String()
}

// ValidateID says why id cannot be a message id, or nil when it can.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("message id %q: 1 to 64 letters, digits, \"_\" or \"-\"", id)
	}
	return nil
}

// idEncoding writes random ids in lower-case letters and digits.
var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewID returns a random message id ("msg_" and 128 random bits), for an event recorded once;
// an event that may be recorded twice (a reconcile that runs again) is better given an id
// derived from what it is about, so that the receiver sees the two as one.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24 and later)
	return "msg_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}
