//go:build !unit

package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// testCA issues certificates for the mutual-TLS test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate and key, PEM-encoded, for the server (with 127.0.0.1) or a client.
func (ca *testCA) issue(t *testing.T, name string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExtAuthzMutualTLS: with TLS and a client CA, a gateway without a certificate, or with one
// from another CA, cannot call Check; one with a certificate the CA signed can, and with
// --authz-strip-authorization the key is removed before the request goes upstream.
func TestExtAuthzMutualTLS(t *testing.T) {
	ns := env.Namespace(t, "authztls")
	k := newKey(t, ns, "k", switchboardv1alpha1.APIKeySpec{})
	dir := t.TempDir()
	ca, other := newTestCA(t, "gateways"), newTestCA(t, "somebody else")
	serverCert, serverKey := ca.issue(t, "switchboard-authz", true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startServer(t, nil, &sc{Authz: configv1alpha1.Authz{GRPC: configv1alpha1.AuthzGRPC{
		TLSCertFile:        writeFile(t, dir, "tls.crt", serverCert),
		TLSKeyFile:         writeFile(t, dir, "tls.key", serverKey),
		ClientCAFile:       writeFile(t, dir, "ca.crt", ca.pem),
		StripAuthorization: true,
	}}}, Deps{AuthzGRPCListener: l}, true)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	check := func(clientCerts []tls.Certificate) (*authv3.CheckResponse, error) {
		conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: roots, Certificates: clientCerts, MinVersion: tls.VersionTLS12})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return authv3.NewAuthorizationClient(conn).Check(ctx(t), checkRequestOf(call{withBearer(k.Key), "192.0.2.1", "connections"}))
	}
	if _, err := check(nil); err == nil {
		t.Error("a gateway without a client certificate was answered")
	}
	otherCert, otherKey := other.issue(t, "intruder", false)
	intruder, err := tls.X509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check([]tls.Certificate{intruder}); err == nil {
		t.Error("a gateway with another CA's certificate was answered")
	}
	gwCert, gwKey := ca.issue(t, "gateway", false)
	gateway, err := tls.X509KeyPair(gwCert, gwKey)
	if err != nil {
		t.Fatal(err)
	}
	var resp *authv3.CheckResponse
	eventually(t, "the key allowed over mutual TLS", func() bool {
		resp, err = check([]tls.Certificate{gateway})
		if err != nil {
			t.Fatalf("the CA's gateway: %v", err)
		}
		return resp.GetOkResponse() != nil
	})
	if !slices.Equal(resp.GetOkResponse().GetHeadersToRemove(), []string{"authorization"}) {
		t.Errorf("headers_to_remove %v, want authorization", resp.GetOkResponse().GetHeadersToRemove())
	}
}
