package servingcert

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func certsOf(t *testing.T, bundle []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

func TestMergeBundle(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	mk := func(at time.Time) *x509.Certificate {
		_, c, err := selfSigned([]string{"switchboard-reveal.ns.svc", "127.0.0.1"}, at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old, older, expired, own := mk(now.Add(-24*time.Hour)), mk(now.Add(-48*time.Hour)), mk(now.Add(-CertLifetime-time.Hour)), mk(now)
	pemOf := func(cs ...*x509.Certificate) []byte {
		var b []byte
		for _, c := range cs {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
		return b
	}
	many := make([]*x509.Certificate, 0, maxBundleCerts+5)
	for i := range maxBundleCerts + 5 {
		many = append(many, mk(now.Add(-time.Duration(i+1)*time.Minute)))
	}
	tests := []struct {
		name   string
		bundle []byte
		want   []*x509.Certificate
	}{
		{"empty", nil, []*x509.Certificate{own}},
		{"other replicas kept, newest first", pemOf(older, old), []*x509.Certificate{own, old, older}},
		{"expired dropped", pemOf(expired, old), []*x509.Certificate{own, old}},
		{"own not twice", pemOf(own, old), []*x509.Certificate{own, old}},
		{"garbage dropped", append([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\nnoise\n"), pemOf(old)...), []*x509.Certificate{own, old}},
		{"bounded, the oldest go", pemOf(many...), append([]*x509.Certificate{own}, many[:maxBundleCerts-1]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := certsOf(t, mergeBundle(tt.bundle, own, now))
			if len(got) != len(tt.want) {
				t.Fatalf("%d certificates, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !got[i].Equal(tt.want[i]) {
					t.Fatalf("certificate %d is not the one wanted", i)
				}
			}
		})
	}
}

func TestSelfSignedVerifies(t *testing.T) {
	now := time.Now()
	_, c, err := selfSigned([]string{"switchboard-reveal.ns.svc", "127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	for _, name := range []string{"switchboard-reveal.ns.svc", "127.0.0.1"} {
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: now}); err != nil {
			t.Fatalf("verifying for %s: %v", name, err)
		}
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: "elsewhere.example", CurrentTime: now}); err == nil {
		t.Fatal("the certificate verifies for a name it was not made for")
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: x509.NewCertPool(), DNSName: "127.0.0.1", CurrentTime: now}); err == nil {
		t.Fatal("the certificate verifies without being trusted")
	}
}
