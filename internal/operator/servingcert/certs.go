package servingcert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"sort"
	"time"
)

// Certificates: each replica signs its own for CertLifetime and signs a new one every
// CertRenewal; a bundle keeps every certificate until it expires, at most maxBundleCerts (the
// newest).
const (
	CertLifetime   = 30 * 24 * time.Hour
	CertRenewal    = 10 * 24 * time.Hour
	maxBundleCerts = 64
)

// selfSigned returns a new key pair and a certificate for it, signed by itself, for names
// (DNS names, or IP addresses), valid from a little before now for CertLifetime.
func selfSigned(names []string, now time.Time) (tls.Certificate, *x509.Certificate, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "switchboard-operator"},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(CertLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// Signed by itself, it is its own trust anchor: a caller trusts exactly these
		// certificates, not whatever they might sign.
		BasicConstraintsValid: true,
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: cert}, cert, nil
}

// mergeBundle returns bundle (PEM) with cert added and every expired or unreadable certificate
// dropped, newest first, at most maxBundleCerts.
func mergeBundle(bundle []byte, cert *x509.Certificate, now time.Time) []byte {
	certs := []*x509.Certificate{cert}
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil || block.Type != "CERTIFICATE" || !now.Before(c.NotAfter) || c.Equal(cert) {
			continue
		}
		certs = append(certs, c)
	}
	sort.SliceStable(certs, func(i, j int) bool { return certs[i].NotBefore.After(certs[j].NotBefore) })
	if len(certs) > maxBundleCerts {
		certs = certs[:maxBundleCerts]
	}
	var out bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return out.Bytes()
}
