package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// identity is a client certificate: who a component is to the API server (or the API server to
// the kubelet), in the groups the default RBAC bindings name.
type identity struct {
	file   string // base name of the .crt, .key and .kubeconfig files
	user   string
	groups []string
}

// identities are the clients of the API server, as kubeadm names them.
var identities = []identity{
	{file: "admin", user: "switchboard-cluster-admin", groups: []string{"system:masters"}},
	{file: "kubelet", user: "system:node:" + NodeName, groups: []string{"system:nodes"}},
	{file: "kube-controller-manager", user: "system:kube-controller-manager"},
	{file: "kube-scheduler", user: "system:kube-scheduler"},
	{file: "kube-proxy", user: "system:kube-proxy"},
	{file: "apiserver-kubelet-client", user: "kube-apiserver-kubelet-client", groups: []string{"system:masters"}},
}

// writePKI writes the cluster's certificates into dir/pki and a kubeconfig per client into dir.
func writePKI(dir string) error {
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "switchboard-cluster-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	ca, err := issue(pkiDir, "ca", caTmpl, nil, caKey, caKey)
	if err != nil {
		return err
	}
	if _, err := issue(pkiDir, "apiserver", &x509.Certificate{
		Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP), net.ParseIP(KubernetesServiceIP)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, nil, caKey); err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(pkiDir, "sa.key"), saKey); err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(pkiDir, "sa.pub"), "PUBLIC KEY", saPub); err != nil {
		return err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	for _, id := range identities {
		if _, err := issue(pkiDir, id.file, &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, ca, nil, caKey); err != nil {
			return err
		}
		if err := writeKubeconfig(filepath.Join(dir, id.file+".kubeconfig"), caPEM,
			filepath.Join(pkiDir, id.file+".crt"), filepath.Join(pkiDir, id.file+".key")); err != nil {
			return err
		}
	}
	return nil
}

// issue signs tmpl with the parent's key (self-signed when parent is nil) for key (a new one
// when nil) and writes name.crt and name.key.
func issue(dir, name string, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) (*x509.Certificate, error) {
	if key == nil {
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, err
		}
	}
	if parent == nil {
		parent = tmpl
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), crypto.Signer(parentKey))
	if err != nil {
		return nil, fmt.Errorf("signing the %s certificate: %w", name, err)
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writeKey(filepath.Join(dir, name+".key"), key); err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}

// writeKubeconfig writes a kubeconfig that reaches the API server on the namespace's loopback
// with a client certificate.
func writeKubeconfig(path string, caPEM []byte, certFile, keyFile string) error {
	cert, err := os.ReadFile(filepath.Clean(certFile))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Clean(keyFile))
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["switchboard"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:" + strconv.Itoa(APIServerPort), CertificateAuthorityData: caPEM}
	kc.AuthInfos["switchboard"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	kc.Contexts["switchboard"] = &clientcmdapi.Context{Cluster: "switchboard", AuthInfo: "switchboard"}
	kc.CurrentContext = "switchboard"
	return clientcmd.WriteToFile(*kc, path)
}
