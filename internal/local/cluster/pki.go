package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/switchboard-dev/switchboard/internal/local/pki"
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
	ca, err := pki.NewCA("switchboard-cluster-ca")
	if err != nil {
		return err
	}
	// kube-controller-manager signs with the CA's key.
	if err := ca.Write(pkiDir, "ca", true); err != nil {
		return err
	}
	if _, err := ca.Issue(pkiDir, "apiserver", &x509.Certificate{
		Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP), net.ParseIP(KubernetesServiceIP)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := pki.WriteKey(filepath.Join(pkiDir, "sa.key"), saKey); err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	if err := pki.WritePEM(filepath.Join(pkiDir, "sa.pub"), "PUBLIC KEY", saPub); err != nil {
		return err
	}
	for _, id := range identities {
		if _, err := ca.Issue(pkiDir, id.file, &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return err
		}
		if err := writeKubeconfig(filepath.Join(dir, id.file+".kubeconfig"), ca.PEM(),
			filepath.Join(pkiDir, id.file+".crt"), filepath.Join(pkiDir, id.file+".key")); err != nil {
			return err
		}
	}
	return nil
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
