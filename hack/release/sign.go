package main

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Where a release's signatures and public key are written in r.dir.
const (
	// pubFile is the copy of the release key's public half users verify with.
	pubFile = "cosign.pub"
	// checksumsSigFile is checksums.txt's signature (base64), for
	// `cosign verify-blob --key cosign.pub --signature checksums.txt.sig checksums.txt`.
	checksumsSigFile = "checksums.txt.sig"
)

// errNoKey is the refusal of a release that would be signed with no key.
var errNoKey = errors.New("no signing key: set COSIGN_KEY (the release key's private half: a file, or env://VAR) " +
	"and COSIGN_PASSWORD (its password), or SIGN=false (-sign=false) for an unsigned dry run (docs/developing.md, \"Cutting a release\")")

// signer signs a release with cosign, key-based and offline: no transparency log, no Fulcio.
type signer struct {
	// cosign is the cosign binary (`make cosign`).
	cosign string
	// key is the private key, as cosign's --key takes it: a file, env://VAR, or a KMS URI.
	key string
	// password is the key's password (COSIGN_PASSWORD; empty for a key without one).
	password string
	// pub is the public half users verify with: cosign.pub at the repository's root.
	pub string
}

// check refuses a signer that could not sign, or would sign with a key other than the one whose
// public half users have; it runs before anything is built.
func (s *signer) check() error {
	if s.key == "" {
		return errNoKey
	}
	if s.cosign == "" {
		return errors.New("-cosign is required to sign: `make cosign` builds it")
	}
	b, err := os.ReadFile(filepath.Clean(s.pub))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s does not exist: the release key's public half must be committed as cosign.pub before the first release: docs/developing.md", s.pub)
	}
	if err != nil {
		return err
	}
	want, err := parsePublicKey(b)
	if err != nil {
		return fmt.Errorf("%s: %w", s.pub, err)
	}
	out, err := s.run("public-key", "--key", s.key)
	if err != nil {
		return fmt.Errorf("reading the public half of COSIGN_KEY (is COSIGN_PASSWORD its password?): %w", err)
	}
	got, err := parsePublicKey(out)
	if err != nil {
		return fmt.Errorf("cosign public-key: %w", err)
	}
	if !got.Equal(want) {
		return fmt.Errorf("COSIGN_KEY is not the private half of %s: a release signed with it would not verify with the public key users have", s.pub)
	}
	return nil
}

// signBlob writes file's signature to sig.
func (s *signer) signBlob(file, sig string) error {
	_, err := s.run("sign-blob", "--key", s.key, "--tlog-upload=false", "--yes", "--output-signature", sig, file)
	return err
}

// signImage signs ref (repository@digest) and pushes the signature beside it, as cosign's
// sha256-<digest>.sig tag; plainHTTP lets cosign speak HTTP to a loopback registry.
func (s *signer) signImage(ref string, plainHTTP bool) error {
	args := []string{"sign", "--key", s.key, "--tlog-upload=false", "--yes"}
	if plainHTTP {
		args = append(args, "--allow-http-registry")
	}
	_, err := s.run(append(args, ref)...)
	return err
}

// run runs cosign with the key's password in its environment and returns its standard output.
func (s *signer) run(args ...string) ([]byte, error) {
	cmd := exec.Command(s.cosign, args...) //nolint:gosec // the cosign binary the Makefile names
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+s.password)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("cosign %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// parsePublicKey reads a PEM public key as cosign writes them (PKIX, "PUBLIC KEY").
func parsePublicKey(b []byte) (interface{ Equal(crypto.PublicKey) bool }, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("no PEM \"PUBLIC KEY\" block")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	e, ok := k.(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return nil, fmt.Errorf("unsupported public key type %T", k)
	}
	return e, nil
}
