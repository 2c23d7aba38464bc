package secretscanning

import (
	"bytes"
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestCheckAlertHeaders(t *testing.T) {
	good := hubSignature(webhookSecret, []byte("{}"))
	hexSum := strings.TrimPrefix(good, "sha256=")
	tests := []struct {
		name   string
		header string
		ok     bool
	}{
		{"GitHub's form", good, true},
		{"upper-case hex", "sha256=" + strings.ToUpper(hexSum), true},
		{"none", "", false},
		{"no sha256=", hexSum, false},
		{"sha1=", "sha1=" + hexSum[:40], false},
		{"short", good[:len(good)-2], false},
		{"long", good + "00", false},
		{"not hex", "sha256=" + strings.Repeat("zz", 32), false},
		{"spaces", "sha256= " + hexSum[1:], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("X-Hub-Signature-256", tt.header)
			}
			err := CheckAlertHeaders(h)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrUnauthenticated)) {
				t.Errorf("CheckAlertHeaders(%q) = %v, want ok=%v", tt.header, err, tt.ok)
			}
		})
	}
}

func TestCheckPartnerHeaders(t *testing.T) {
	f := newFakeKeys(t)
	p256 := sign(t, f.add(t, keyID, elliptic.P256()), []byte("[]"))
	p384 := sign(t, f.add(t, "p384", elliptic.P384()), []byte("[]"))
	raw, _ := base64.StdEncoding.DecodeString(p256)
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name    string
		id, sig string
		ok      bool
	}{
		{"GitHub's form", keyID, p256, true},
		// Another curve's signature has the same shape: the key, once known, refuses it.
		{"a P-384 signature", keyID, p384, true},
		{"no identifier", "", p256, false},
		{"identifier too long", strings.Repeat("a", 257), p256, false},
		{"no signature", keyID, "", false},
		{"not base64", keyID, "not base64!", false},
		{"base64, not ASN.1", keyID, b64([]byte("garbage")), false},
		{"ASN.1 with bytes after it", keyID, b64(append(raw, 0)), false},
		{"a sequence of one integer", keyID, b64([]byte{0x30, 0x03, 0x02, 0x01, 0x01}), false},
		{"zero integers", keyID, b64([]byte{0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00}), false},
		{"negative integers", keyID, b64([]byte{0x30, 0x06, 0x02, 0x01, 0xff, 0x02, 0x01, 0xff}), false},
		{"a header too long", keyID, strings.Repeat("A", 516), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.id != "" {
				h.Set("Github-Public-Key-Identifier", tt.id)
			}
			if tt.sig != "" {
				h.Set("Github-Public-Key-Signature", tt.sig)
			}
			err := CheckPartnerHeaders(h)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrUnauthenticated)) {
				t.Errorf("CheckPartnerHeaders() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestVerifyReadsNoBodyWithoutASignature: a request whose signature headers GitHub could not
// have sent is refused before a byte of its body is read, by both ways, and the partner's keys
// are not fetched for it.
func TestVerifyReadsNoBodyWithoutASignature(t *testing.T) {
	f := newFakeKeys(t)
	f.add(t, keyID, elliptic.P256())
	partner := newTestPartner(t, f, 0, 0)
	webhook, err := NewAlertWebhook(AlertWebhookOptions{Secret: webhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1000)
	for name, verify := range map[string]func(*http.Request) ([]byte, error){
		"partner, no signature": func(r *http.Request) ([]byte, error) { return partner.Verify(r) },
		"partner, garbled signature": func(r *http.Request) ([]byte, error) {
			r.Header.Set("Github-Public-Key-Signature", "x")
			return partner.Verify(r)
		},
		"alert, no signature": func(r *http.Request) ([]byte, error) { return webhook.Verify(r) },
		"alert, garbled signature": func(r *http.Request) ([]byte, error) {
			r.Header.Set("X-Hub-Signature-256", "sha256=x")
			return webhook.Verify(r)
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := partnerRequest(nil, keyID, "")
			counted := &countingReader{r: bytes.NewReader(body)}
			r.Body, r.ContentLength = io.NopCloser(counted), int64(len(body))
			if _, err := verify(r); !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("Verify() = %v, want ErrUnauthenticated", err)
			}
			if counted.n != 0 {
				t.Errorf("Verify() read %d bytes of the body of a request without a signature", counted.n)
			}
		})
	}
	if n := f.fetches.Load(); n != 0 {
		t.Errorf("the keys were fetched %d times for requests without a signature", n)
	}
}
