package secretscanning

import (
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/http"
	"strings"
)

// The signature headers are checked before a byte of the body is read: a request without a
// signature GitHub could have made is refused at the cost of its headers alone, and its body
// is never read.

// Bounds of the partner program's signature headers, far above what GitHub sends (a 64-hex
// identifier; some 96 base64 characters of a P-256 signature).
const (
	// maxIdentifier bounds Github-Public-Key-Identifier.
	maxIdentifier = 256
	// maxSignatureHeader bounds Github-Public-Key-Signature.
	maxSignatureHeader = 512
)

// CheckAlertHeaders checks that an organization's webhook delivery carries a signature GitHub
// could have made, X-Hub-Signature-256 as "sha256=" and 64 hex digits, without reading its
// body. Its error wraps ErrUnauthenticated.
func CheckAlertHeaders(h http.Header) error {
	_, err := parseHubSignature(h.Get("X-Hub-Signature-256"))
	return err
}

// CheckPartnerHeaders checks that a partner program request carries a signature GitHub could
// have made, a Github-Public-Key-Identifier and a Github-Public-Key-Signature that is the
// base64 of an ASN.1 ECDSA signature, without reading its body. Its error wraps
// ErrUnauthenticated.
func CheckPartnerHeaders(h http.Header) error {
	_, err := parsePartnerSignature(h.Get("Github-Public-Key-Identifier"), h.Get("Github-Public-Key-Signature"))
	return err
}

// parseHubSignature reads an X-Hub-Signature-256 header: the HMAC-SHA256 it says.
func parseHubSignature(header string) ([]byte, error) {
	if header == "" {
		return nil, fmt.Errorf("%w: no X-Hub-Signature-256 header", ErrUnauthenticated)
	}
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return nil, fmt.Errorf("%w: X-Hub-Signature-256 does not begin with sha256=", ErrUnauthenticated)
	}
	if len(hexSum) != hex.EncodedLen(sha256.Size) {
		return nil, fmt.Errorf("%w: X-Hub-Signature-256 is not a hex SHA-256", ErrUnauthenticated)
	}
	sum, err := hex.DecodeString(hexSum)
	if err != nil {
		return nil, fmt.Errorf("%w: X-Hub-Signature-256 is not a hex SHA-256", ErrUnauthenticated)
	}
	return sum, nil
}

// parsePartnerSignature reads the partner program's signature headers: the ASN.1 signature they
// carry, checked to be an ECDSA signature's shape (two positive integers).
func parsePartnerSignature(identifier, signature string) ([]byte, error) {
	if identifier == "" {
		return nil, fmt.Errorf("%w: no Github-Public-Key-Identifier header", ErrUnauthenticated)
	}
	if len(identifier) > maxIdentifier {
		return nil, fmt.Errorf("%w: Github-Public-Key-Identifier is %d bytes, more than %d", ErrUnauthenticated, len(identifier), maxIdentifier)
	}
	if signature == "" {
		return nil, fmt.Errorf("%w: no Github-Public-Key-Signature header", ErrUnauthenticated)
	}
	if len(signature) > maxSignatureHeader {
		return nil, fmt.Errorf("%w: Github-Public-Key-Signature is %d bytes, more than %d", ErrUnauthenticated, len(signature), maxSignatureHeader)
	}
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return nil, fmt.Errorf("%w: Github-Public-Key-Signature is not base64", ErrUnauthenticated)
	}
	var rs struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(sig, &rs); err != nil || len(rest) > 0 || rs.R.Sign() <= 0 || rs.S.Sign() <= 0 {
		return nil, fmt.Errorf("%w: Github-Public-Key-Signature is not an ASN.1 ECDSA signature", ErrUnauthenticated)
	}
	return sig, nil
}
