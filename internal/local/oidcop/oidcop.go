// Package oidcop runs hack/tools/oidc-op, zitadel/oidc's OpenID Provider with a login page, over
// TLS from a CA made for it, with users and one client: the provider the panel's tests sign in
// on, and the local one `switchboard dev --sso` offers. It is a development tool, never a
// production identity provider (passwords sit in a file in plain text).
package oidcop

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// User is a person of the tests' OpenID Provider.
type User struct {
	ID       string   `json:"id"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Email    string   `json:"email,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// Options shape Start.
type Options struct {
	// Binary is the built hack/tools/oidc-op.
	Binary   string
	Users    []User
	ClientID string
	// RedirectURIs and PostLogoutRedirectURIs are globs (path.Match) the provider accepts.
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	// IDTokenLifetime of the tokens it issues (default an hour).
	IDTokenLifetime time.Duration
}

// Provider is a running bin/oidc-op: zitadel/oidc's OpenID Provider with a login page, over
// TLS from a CA made for it.
type Provider struct {
	IssuerURL    string
	ClientID     string
	ClientSecret string
	// CAPEM is the CA its TLS certificate chains to; CAFile holds it.
	CAPEM  string
	CAFile string
	// SPKIHash is the base64 SHA-256 of its TLS certificate's public key, for Chromium's
	// --ignore-certificate-errors-spki-list: a browser trusts that one certificate, nothing else.
	SPKIHash string
	dir      string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has exited, with waitErr set
	waitErr  error
	stopOnce sync.Once
	stopErr  error
}

// Start starts the provider binary opts.Binary on a free loopback port, and waits
// until its discovery document answers. Stop it with Stop.
func Start(opts Options) (*Provider, error) {
	bin := opts.Binary
	dir, err := os.MkdirTemp("", "oidc-op-")
	if err != nil {
		return nil, err
	}
	p := &Provider{ClientID: opts.ClientID, dir: dir, exited: make(chan struct{})}
	fail := func(err error) (*Provider, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	caPEM, certPEM, keyPEM, err := selfSignedChain()
	if err != nil {
		return fail(err)
	}
	block, _ := pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fail(err)
	}
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	p.SPKIHash = base64.StdEncoding.EncodeToString(spki[:])
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return fail(err)
	}
	p.ClientSecret = fmt.Sprintf("%x", secret)
	users, err := json.Marshal(opts.Users) //nolint:gosec // the test users' passwords go to the provider's users file, as they must
	if err != nil {
		return fail(err)
	}
	p.CAPEM, p.CAFile = string(caPEM), filepath.Join(dir, "ca.pem")
	for name, data := range map[string][]byte{"ca.pem": caPEM, "tls.crt": certPEM, "tls.key": keyPEM, "users.json": users, "secret": []byte(p.ClientSecret)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fail(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	p.IssuerURL = "https://" + addr
	lifetime := opts.IDTokenLifetime
	if lifetime == 0 {
		lifetime = time.Hour
	}
	args := []string{"-issuer", p.IssuerURL, "-tls-cert", filepath.Join(dir, "tls.crt"), "-tls-key", filepath.Join(dir, "tls.key"),
		"-users", filepath.Join(dir, "users.json"), "-client-id", opts.ClientID, "-client-secret-file", filepath.Join(dir, "secret"),
		"-id-token-lifetime", lifetime.String()}
	for _, u := range opts.RedirectURIs {
		args = append(args, "-redirect-uri", u)
	}
	for _, u := range opts.PostLogoutRedirectURIs {
		args = append(args, "-post-logout-redirect-uri", u)
	}
	p.cmd = exec.Command(bin, args...) //nolint:gosec // the tests' own provider binary, with this helper's flags
	// The provider dies with the test binary, even one killed by a timeout.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logFile, err := os.Create(filepath.Join(dir, "oidc-op.log")) //nolint:gosec // in this helper's own temporary directory
	if err != nil {
		return fail(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return fail(err)
	}
	go func() { p.waitErr = p.cmd.Wait(); _ = logFile.Close(); close(p.exited) }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.exited:
			return fail(fmt.Errorf("oidc-op exited: %w\n%s", p.waitErr, p.Log()))
		default:
		}
		resp, err := hc.Get(p.IssuerURL + "/.well-known/openid-configuration")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			_ = p.Stop()
			return nil, fmt.Errorf("oidc-op did not serve its discovery document within 30s: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log is what the provider wrote so far.
func (p *Provider) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "oidc-op.log"))
	return string(b)
}

// LogLines returns the provider's log, one entry a line, for tests that look for a secret.
func (p *Provider) LogLines() []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(p.Log()))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// Stop ends the provider and removes its files. Calling it again does nothing.
func (p *Provider) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

func (p *Provider) stop() error {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	return os.RemoveAll(p.dir)
}

// WriteAuthenticationConfig writes an AuthenticationConfiguration with the given YAML body to
// a file for kube-apiserver's --authentication-config, and returns its path.
func (p *Provider) WriteAuthenticationConfig(yaml string) (string, error) {
	path := filepath.Join(p.dir, "authentication-config.yaml")
	return path, os.WriteFile(path, []byte(yaml), 0o600)
}

// selfSignedChain makes a CA and a certificate for 127.0.0.1 and localhost signed by it.
func selfSignedChain() (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "switchboard tests OIDC CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	if caDER == nil || leafDER == nil {
		return nil, nil, nil, errors.New("no certificate made")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
