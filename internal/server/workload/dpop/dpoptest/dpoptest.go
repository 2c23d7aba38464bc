// Package dpoptest makes the proofs a client of a key bound to its public key sends in the DPoP
// header, for tests and for docs: what a client library does, in a few lines of go-jose.
//
//	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
//	bound := dpoptest.Thumbprint(&key.PublicKey) // what the APIKey is bound to
//	proof, _ := dpoptest.Make(key, dpoptest.Claims{Method: "GET", URL: "https://api.example.com/v1/connections",
//		APIKey: apiKey, IssuedAt: time.Now()})
//	req.Header.Set("Authorization", "Bearer "+apiKey)
//	req.Header.Set("DPoP", proof)
package dpoptest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Claims are what a proof says. A zero ID is replaced by a random one; a TokenHash, when set,
// is sent as ath in place of the hash of APIKey (to make a proof for another key).
type Claims struct {
	Method    string
	URL       string
	APIKey    string
	IssuedAt  time.Time
	ID        string
	TokenHash string
}

// Make returns a proof for c signed with key (an *ecdsa.PrivateKey on P-256, an
// ed25519.PrivateKey or an *rsa.PrivateKey), its public key in the header as jwk.
func Make(key crypto.Signer, c Claims) (string, error) {
	alg, err := algorithm(key)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key},
		(&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		return "", err
	}
	if c.ID == "" {
		var id [16]byte
		_, _ = rand.Read(id[:])
		c.ID = base64.RawURLEncoding.EncodeToString(id[:])
	}
	if c.TokenHash == "" {
		c.TokenHash = TokenHash(c.APIKey)
	}
	payload, err := json.Marshal(map[string]any{
		"htm": c.Method, "htu": c.URL, "iat": c.IssuedAt.Unix(), "jti": c.ID, "ath": c.TokenHash,
	})
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// TokenHash is the ath of a proof for apiKey: base64url of its SHA-256.
func TokenHash(apiKey string) string {
	h := sha256.Sum256([]byte(apiKey))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// Thumbprint is the RFC 7638 SHA-256 thumbprint of pub, base64url: what a key is bound to.
func Thumbprint(pub crypto.PublicKey) string {
	jwk := jose.JSONWebKey{Key: pub}
	t, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		panic("dpoptest: thumbprint: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(t)
}

func algorithm(key crypto.Signer) (jose.SignatureAlgorithm, error) {
	switch key.(type) {
	case *ecdsa.PrivateKey:
		return jose.ES256, nil
	case ed25519.PrivateKey:
		return jose.EdDSA, nil
	case *rsa.PrivateKey:
		return jose.RS256, nil
	}
	return "", errors.New("dpoptest: a key of another type than ECDSA, Ed25519 or RSA")
}
