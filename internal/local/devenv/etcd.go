package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/switchboard-dev/switchboard/internal/local/pki"
	"github.com/switchboard-dev/switchboard/internal/local/proc"
)

// etcdMember is the member name: it is part of etcd's data, so it stays the one earlier runs
// bootstrapped with.
const etcdMember = "switchboard-dev"

// startEtcd writes etcd's certificates, starts etcd with them and waits until it is healthy.
// Both of etcd's ports, clients' and peers', are TLS that requires a client certificate
// issued at this start: a local user who learns the port (from ps) reaches nothing.
func (cp *controlPlane) startEtcd(ctx context.Context) error {
	hadData := dirHasEntries(cp.etcdDataDir())
	if err := writeEtcdPKI(cp.etcdPKIDir()); err != nil {
		return fmt.Errorf("writing etcd's certificates into %s: %w", cp.etcdPKIDir(), err)
	}
	tlsConfig, err := etcdClientTLS(cp.etcdPKIDir())
	if err != nil {
		return err
	}
	clientAddr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	peerAddr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	clientURL := &url.URL{Scheme: "https", Host: clientAddr}
	cmd := exec.Command(filepath.Join(cp.assets, "etcd"), //nolint:gosec // the etcd binary of --assets, run by the person who chose it
		"--name="+etcdMember,
		"--data-dir="+cp.etcdDataDir(),
		"--listen-client-urls="+clientURL.String(),
		"--advertise-client-urls="+clientURL.String(),
		"--client-cert-auth",
		"--trusted-ca-file="+cp.etcdFile("ca.crt"),
		"--cert-file="+cp.etcdFile("server.crt"),
		"--key-file="+cp.etcdFile("server.key"),
		// A one-member cluster talks to no peer, but etcd listens for them all the same.
		"--listen-peer-urls=https://"+peerAddr,
		"--peer-client-cert-auth",
		"--peer-trusted-ca-file="+cp.etcdFile("ca.crt"),
		"--peer-cert-file="+cp.etcdFile("server.crt"),
		"--peer-key-file="+cp.etcdFile("server.key"),
		// As envtest runs it: a development control plane trades durability on power loss for
		// speed.
		"--unsafe-no-fsync=true",
	)
	p, err := proc.Start(cmd, proc.Options{Name: "etcd", LogPath: cp.etcdLog()})
	if err != nil {
		return err
	}
	cp.etcd, cp.etcdURL = p, clientURL

	transport := &http.Transport{TLSClientConfig: tlsConfig}
	defer transport.CloseIdleConnections()
	err = p.WaitHTTP(ctx, &http.Client{Transport: transport, Timeout: 5 * time.Second}, clientURL.String()+"/health", 60*time.Second)
	var exited *proc.ExitError
	switch {
	case err == nil:
		return nil
	case hadData && errors.As(err, &exited):
		// The end of its output is a Go stack trace here; the path is more use than the trace.
		return brokenState(fmt.Errorf("etcd could not open its data in %s (it exited: %w; see %s)", cp.etcdDataDir(), exited.Err, cp.etcdLog()))
	default:
		return fmt.Errorf("starting etcd: %w", err)
	}
}

// writeEtcdPKI writes into dir (0700) a new CA's certificate (ca.crt), etcd's certificate for
// its client and peer ports (server.crt, .key), and the client certificate kube-apiserver and
// dev present (client.crt, .key), each 0600. The CA's key is not written: once this returns,
// nothing can issue another certificate etcd accepts.
func writeEtcdPKI(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := pki.NewCA("switchboard-dev-etcd-ca")
	if err != nil {
		return err
	}
	if err := ca.Write(dir, "ca", false); err != nil {
		return err
	}
	// The peer port uses the same certificate, as server and as client.
	if _, err := ca.Issue(dir, "server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "switchboard-dev-etcd"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return err
	}
	_, err = ca.Issue(dir, "client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-etcd-client"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return err
}

// etcdClientTLS is the TLS configuration of etcd's clients, from the files writeEtcdPKI wrote
// into dir: it trusts only etcd's CA and presents the client certificate.
func etcdClientTLS(dir string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Clean(filepath.Join(dir, "ca.crt")))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s holds no certificate", filepath.Join(dir, "ca.crt"))
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
