package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
)

// What a CA issues verifies against it for the usages it was issued for, and every file is
// readable only by its owner; a CA written without its key leaves no key behind.
func TestIssue(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, "ca", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); !os.IsNotExist(err) {
		t.Fatalf("ca.key was written without withKey (%v)", err)
	}
	tests := []struct {
		name  string
		usage x509.ExtKeyUsage
	}{
		{name: "server", usage: x509.ExtKeyUsageServerAuth},
		{name: "client", usage: x509.ExtKeyUsageClientAuth},
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ca.Issue(dir, tt.name, &x509.Certificate{Subject: pkix.Name{CommonName: tt.name},
				KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{tt.usage}}); err != nil {
				t.Fatal(err)
			}
			pair, err := tls.LoadX509KeyPair(filepath.Join(dir, tt.name+".crt"), filepath.Join(dir, tt.name+".key"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tt.usage}}); err != nil {
				t.Fatalf("the %s certificate does not verify against its CA: %v", tt.name, err)
			}
			other := map[x509.ExtKeyUsage]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth: x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageClientAuth: x509.ExtKeyUsageServerAuth}[tt.usage]
			if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{other}}); err == nil {
				t.Fatalf("the %s certificate verifies for a usage it was not issued for", tt.name)
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}
}

// A file written over one that others could read is made private.
func TestWritePEMNarrowsAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.key")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil { //nolint:gosec // the wide mode is the point
		t.Fatal(err)
	}
	if err := WritePEM(path, "TEST", []byte("new")); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", info.Mode().Perm())
	}
}
