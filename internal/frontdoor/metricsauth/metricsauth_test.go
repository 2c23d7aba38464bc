package metricsauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
)

// TestServingCertificate: the certificate of the directory when it holds tls.crt and tls.key,
// as controller-runtime's metrics server chose it; else a self-signed one for localhost.
func TestServingCertificate(t *testing.T) {
	withCert := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("metrics.example", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withCert, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withCert, "tls.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	onlyCert := t.TempDir()
	if err := os.WriteFile(filepath.Join(onlyCert, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tt := range []struct {
		name, dir, want string
	}{
		{"a certificate and its key", withCert, "metrics.example"},
		{"a certificate without its key", onlyCert, "localhost"},
		{"nothing", t.TempDir(), "localhost"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := serving(ctx, tt.dir, logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			cert := &tls.Certificate{}
			if cfg.GetCertificate != nil {
				if cert, err = cfg.GetCertificate(&tls.ClientHelloInfo{}); err != nil {
					t.Fatal(err)
				}
			} else if len(cfg.Certificates) == 1 {
				cert = &cfg.Certificates[0]
			}
			if len(cert.Certificate) == 0 {
				t.Fatal("no certificate")
			}
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := leaf.VerifyHostname(tt.want); err != nil {
				t.Errorf("the certificate is not %s's: %v", tt.want, err)
			}
		})
	}
}

// TestEndpointKeepsItsPath: an extra handler may not take /metrics.
func TestEndpointKeepsItsPath(t *testing.T) {
	const addr = "127.0.0.1:0"
	if _, err := Listener(context.Background(), nil, addr, Options{ExtraHandlers: map[string]http.Handler{Path: http.NotFoundHandler()}}); err == nil {
		t.Error("an extra handler took /metrics")
	}
	if _, err := Listener(context.Background(), nil, addr, Options{Secure: true}); err == nil {
		t.Error("secure metrics without a client configuration to review tokens with")
	}
}
