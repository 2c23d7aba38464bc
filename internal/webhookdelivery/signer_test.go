package webhookdelivery

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// testSecret returns a whsec_ secret of n bytes, all b.
func testSecret(b byte, n int) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n))
}

// headers returns the headers a delivery of body signed by s at t carries.
func headers(s *Signer, id string, t time.Time, body []byte) http.Header {
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(t.Unix(), 10))
	h.Set(HeaderSignature, s.Sign(id, t, body))
	return h
}

// verifier returns the Standard Webhooks reference library's verifier of secret.
func verifier(t *testing.T, secret string) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

// TestSignatureVerifiesWithTheReferenceLibrary checks Sign against the Standard Webhooks
// reference library: what it signs verifies, and a delivery changed in any signed part (body,
// timestamp, id) or signed with another secret does not.
func TestSignatureVerifiesWithTheReferenceLibrary(t *testing.T) {
	secret, other := testSecret(1, 32), testSecret(2, 32)
	s, err := NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	body := []byte(`{"type":"apikey.leaked","timestamp":"2026-11-27T09:00:00Z","data":{}}`)
	const id = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"

	for _, tc := range []struct {
		name   string
		secret string
		change func(h http.Header, body []byte) []byte
		valid  bool
	}{
		{name: "as signed", secret: secret, valid: true},
		{name: "another secret", secret: other},
		{name: "body changed", secret: secret, change: func(_ http.Header, b []byte) []byte {
			return bytes.Replace(b, []byte("leaked"), []byte("created"), 1)
		}},
		{name: "body with a space more", secret: secret, change: func(_ http.Header, b []byte) []byte {
			return append(b, ' ')
		}},
		{name: "timestamp changed", secret: secret, change: func(h http.Header, b []byte) []byte {
			h.Set(HeaderTimestamp, strconv.FormatInt(at.Unix()+1, 10))
			return b
		}},
		{name: "id changed", secret: secret, change: func(h http.Header, b []byte) []byte {
			h.Set(HeaderID, id+"x")
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := headers(s, id, at, body)
			b := append([]byte(nil), body...)
			if tc.change != nil {
				b = tc.change(h, b)
			}
			err := verifier(t, tc.secret).VerifyIgnoringTimestamp(b, h)
			if tc.valid && err != nil {
				t.Errorf("the reference library refuses the signature: %v", err)
			}
			if !tc.valid && err == nil {
				t.Error("the reference library verified it")
			}
		})
	}

	// And with its timestamp check, at the time of signing.
	now := time.Now()
	if err := verifier(t, secret).Verify(body, headers(s, id, now, body)); err != nil {
		t.Errorf("the reference library refuses a delivery signed now: %v", err)
	}
}

// TestSecretRotation checks that a delivery signed with two secrets verifies for a receiver
// that knows either, and not for one that knows neither: the header lists both signatures.
func TestSecretRotation(t *testing.T) {
	old, current, unknown := testSecret(1, 32), testSecret(2, 24), testSecret(3, 64)
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	body := []byte(`{"type":"apikey.rotated"}`)
	const id = "msg_1"

	both, err := NewSigner(old, current)
	if err != nil {
		t.Fatal(err)
	}
	h := headers(both, id, at, body)
	if got := strings.Count(h.Get(HeaderSignature), "v1,"); got != 2 {
		t.Fatalf("webhook-signature %q has %d signatures, want 2", h.Get(HeaderSignature), got)
	}
	for _, tc := range []struct {
		name, secret string
		valid        bool
	}{
		{"receiver knows the old secret", old, true},
		{"receiver knows the new secret", current, true},
		{"receiver knows neither", unknown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifier(t, tc.secret).VerifyIgnoringTimestamp(body, h)
			if tc.valid != (err == nil) {
				t.Errorf("valid %v, the reference library says %v", tc.valid, err)
			}
		})
	}

	// After the rotation, the old secret no longer verifies.
	after, err := NewSigner(current)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier(t, old).VerifyIgnoringTimestamp(body, headers(after, id, at, body)); err == nil {
		t.Error("a delivery signed with the new secret alone verifies with the old one")
	}
}

// TestNewSignerRefusesMalformedSecrets checks that each kind of malformed secret is refused
// with an error that says which one and why, and never quotes it.
func TestNewSignerRefusesMalformedSecrets(t *testing.T) {
	good := testSecret(1, 32)
	for _, tc := range []struct {
		name    string
		secrets []string
		want    string // in the error
	}{
		{"none", nil, "no signing secret"},
		{"no prefix", []string{strings.TrimPrefix(good, SecretPrefix)}, `signing secret 1 of 1: does not begin with "whsec_"`},
		{"another prefix", []string{"whsk_" + strings.TrimPrefix(good, SecretPrefix)}, "does not begin with"},
		{"not base64", []string{SecretPrefix + "not*base64!AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, "is not standard base64"},
		{"url-safe base64", []string{SecretPrefix + strings.Repeat("-_", 22)}, "is not standard base64"},
		{"too short", []string{testSecret(1, 23)}, "decodes to 23 bytes; a secret has 24 to 64"},
		{"too long", []string{testSecret(1, 65)}, "decodes to 65 bytes"},
		{"empty", []string{SecretPrefix}, "decodes to 0 bytes"},
		{"second of two", []string{good, "whsec_AAAA"}, "signing secret 2 of 2: decodes to 3 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSigner(tc.secrets...)
			if err == nil {
				t.Fatalf("NewSigner accepted %d malformed secrets: %+v", len(tc.secrets), s)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			for _, secret := range tc.secrets {
				body := strings.TrimPrefix(secret, SecretPrefix)
				if len(body) >= 4 && strings.Contains(err.Error(), body) {
					t.Errorf("error %q quotes the secret", err)
				}
			}
		})
	}
	for _, ok := range [][]string{{testSecret(9, 24)}, {testSecret(9, 64)}, {good, testSecret(2, 40)}} {
		if _, err := NewSigner(ok...); err != nil {
			t.Errorf("NewSigner refused well-formed secrets: %v", err)
		}
	}
}

// TestMessageIDs checks ValidateID's table, and that NewID's ids pass it and differ.
func TestMessageIDs(t *testing.T) {
	for _, tc := range []struct {
		id    string
		valid bool
	}{
		{"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", true},
		{"0f8e2c1a-4b7d-4e8a-9a55-3c2e1d0b9f77-apikey-created-1", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"msg.1", false}, // "." delimits the signed content
		{"msg 1", false},
		{"msg\n1", false},
		{"msg/1", false},
	} {
		if err := ValidateID(tc.id); (err == nil) != tc.valid {
			t.Errorf("ValidateID(%q) = %v, want valid %v", tc.id, err, tc.valid)
		}
	}
	a, b := NewID(), NewID()
	if err := ValidateID(a); err != nil {
		t.Error(err)
	}
	if a == b || !strings.HasPrefix(a, "msg_") || len(a) != len("msg_")+26 {
		t.Errorf("NewID returned %q and %q", a, b)
	}
}
