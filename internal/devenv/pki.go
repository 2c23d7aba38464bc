package devenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of files the control plane needs, kept under <state>/pki so that a restart
// reuses them: the admin kubeconfig a user exported keeps working across restarts.
type pki struct {
	dir string
}

const certValidity = 10 * 365 * 24 * time.Hour

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// CACert, ServingCert, ... name the files kube-apiserver and the admin client read.
func (p pki) caCert() string      { return p.path("ca.crt") }
func (p pki) caKey() string       { return p.path("ca.key") }
func (p pki) servingCert() string { return p.path("apiserver.crt") }
func (p pki) servingKey() string  { return p.path("apiserver.key") }
func (p pki) adminCert() string   { return p.path("admin.crt") }
func (p pki) adminKey() string    { return p.path("admin.key") }
func (p pki) saKey() string       { return p.path("sa.key") }
func (p pki) saPub() string       { return p.path("sa.pub") }

func (p pki) files() []string {
	return []string{p.caCert(), p.caKey(), p.servingCert(), p.servingKey(), p.adminCert(), p.adminKey(), p.saKey(), p.saPub()}
}

// ensure generates the PKI when none exists and checks it when one does. A partial or
// unreadable PKI is a broken state dir, which only --fresh repairs.
func (p pki) ensure() error {
	present := 0
	for _, f := range p.files() {
		if _, err := os.Stat(f); err == nil {
			present++
		}
	}
	switch present {
	case 0:
		return p.generate()
	case len(p.files()):
		return p.check()
	default:
		return brokenState(fmt.Errorf("%s holds %d of the %d certificate files", p.dir, present, len(p.files())))
	}
}

func (p pki) check() error {
	for _, pair := range [][2]string{{p.servingCert(), p.servingKey()}, {p.adminCert(), p.adminKey()}, {p.caCert(), p.caKey()}} {
		if _, err := tls.LoadX509KeyPair(pair[0], pair[1]); err != nil {
			return brokenState(fmt.Errorf("reading %s: %w", pair[0], err))
		}
	}
	return nil
}

func (p pki) generate() error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	caKey, err := newKey()
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "switchboard-dev-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := sign(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	servingKey, err := newKey()
	if err != nil {
		return err
	}
	servingDER, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, servingKey.Public(), caKey)
	if err != nil {
		return err
	}
	adminKey, err := newKey()
	if err != nil {
		return err
	}
	// system:masters is the group the API server grants everything without consulting RBAC.
	adminDER, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "switchboard-dev-admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, adminKey.Public(), caKey)
	if err != nil {
		return err
	}
	saKey, err := newKey()
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	writes := []struct {
		path  string
		block string
		der   []byte
	}{
		{p.caCert(), "CERTIFICATE", caDER},
		{p.servingCert(), "CERTIFICATE", servingDER},
		{p.adminCert(), "CERTIFICATE", adminDER},
		{p.saPub(), "PUBLIC KEY", saPub},
	}
	for _, k := range []struct {
		path string
		key  *ecdsa.PrivateKey
	}{{p.caKey(), caKey}, {p.servingKey(), servingKey}, {p.adminKey(), adminKey}, {p.saKey(), saKey}} {
		der, err := x509.MarshalECPrivateKey(k.key)
		if err != nil {
			return err
		}
		writes = append(writes, struct {
			path  string
			block string
			der   []byte
		}{k.path, "EC PRIVATE KEY", der})
	}
	for _, w := range writes {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.block, Bytes: w.der}), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(certValidity)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate: %w", err)
	}
	return der, nil
}

// ErrBrokenState marks a state dir that cannot be reused; --fresh starts over.
var ErrBrokenState = errors.New("the state dir is broken")

func brokenState(cause error) error { return fmt.Errorf("%w (%w)", ErrBrokenState, cause) }
