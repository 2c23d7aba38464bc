package reveal

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Certificates of the endpoint: each replica signs its own for CertLifetime and signs a new one
// every CertRenewal; the bundle keeps every certificate until it expires, at most
// maxBundleCerts (the newest).
const (
	CertLifetime = 30 * 24 * time.Hour
	CertRenewal  = 10 * 24 * time.Hour
	// BundleKey is the CA bundle's key in its ConfigMap.
	BundleKey      = "ca.crt"
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
		Subject:      pkix.Name{CommonName: "switchboard reveal endpoint"},
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

// publish adds cert to the bundle in ConfigMap key, creating the ConfigMap when there is none;
// replicas publishing at once retry on conflict.
func publish(ctx context.Context, c client.Client, key client.ObjectKey, cert *x509.Certificate, now time.Time) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		err := c.Get(ctx, key, &cm)
		if apierrors.IsNotFound(err) {
			cm = corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{
					"app.kubernetes.io/name": "switchboard", "app.kubernetes.io/component": "reveal",
				}},
				Data: map[string]string{BundleKey: string(mergeBundle(nil, cert, now))},
			}
			err = c.Create(ctx, &cm)
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), key.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		merged := string(mergeBundle([]byte(cm.Data[BundleKey]), cert, now))
		if cm.Data[BundleKey] == merged {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[BundleKey] = merged
		return c.Update(ctx, &cm)
	})
	if err != nil {
		return fmt.Errorf("publishing the reveal endpoint's certificate in ConfigMap %s: %w", key, err)
	}
	return nil
}
