// Package pki issues the certificates of switchboard's local control planes (`make cluster`,
// `switchboard dev`): a certificate authority and the certificates it signs, written as PEM
// files only their owner may read.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Validity is how long an issued certificate is valid: the local control planes make theirs
// anew, so a year outlives any of them.
const Validity = 365 * 24 * time.Hour

// CA is a certificate authority: its certificate and the key that signs.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA returns a self-signed CA, named commonName, with a new key; nothing is written.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := sign(tmpl, tmpl, key, key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA %s: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// PEM is the CA's certificate, as a peer that trusts it reads it.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Write writes the CA's certificate to dir/name.crt and, when withKey, its key to
// dir/name.key: a CA whose key is not written signs nothing after this process.
func (ca *CA) Write(dir, name string, withKey bool) error {
	if err := WritePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", ca.Cert.Raw); err != nil {
		return err
	}
	if !withKey {
		return nil
	}
	return WriteKey(filepath.Join(dir, name+".key"), ca.Key)
}

// Issue signs tmpl (its subject, names and usages; serial and validity are set here) for a new
// key, and writes dir/name.crt and dir/name.key.
func (ca *CA) Issue(dir, name string, tmpl *x509.Certificate) (*x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := sign(tmpl, ca.Cert, key, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing the %s certificate: %w", name, err)
	}
	if err := WritePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := WriteKey(filepath.Join(dir, name+".key"), key); err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// sign sets tmpl's serial and validity (from an hour ago, for clocks a little apart) and signs
// it with parentKey for key.
func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(Validity)
	return x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
}

// WriteKey writes key to path as PEM, readable only by its owner.
func WriteKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return WritePEM(path, "EC PRIVATE KEY", der)
}

// WritePEM writes der to path as one PEM block, readable only by its owner (0600, also when
// path existed with a wider mode).
func WritePEM(path, blockType string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
