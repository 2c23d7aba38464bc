// Package dpop verifies the proof a client outside the cluster sends beside a key bound to its
// public key: a JWS in the shape of DPoP (RFC 9449) in the request's DPoP header, signed per
// request, that names the request's method and URL, its time, a proof id, and the hash of the
// key it travels with.
//
// What such a binding defends: a key copied alone (into a commit, a CI log, a ticket, a chat) is
// useless, because every request it authorizes must also carry a proof signed with a private key
// the copy does not include; and a proof copied with it is useless too, because it names one
// method and URL, is accepted within a short window, once (the replay cache), and only with the
// key whose hash it carries. What it cannot defend: a client whose private key is read with the
// API key (both on the same disk, in the same process's memory, in the same Secret) has lost
// both; a proof observed in flight can be raced to the server within its window for the same
// method and URL before the original arrives (TLS is what keeps proofs from being observed); and
// a replica's replay cache is its own, so across replicas a captured proof can be replayed once
// per replica within the window (a shared cache, or the server's nonce of RFC 9449 §8, would
// close that).
//
// Nothing here reads the API key: the caller passes its SHA-256 (the hash keycheck already
// computes), so no refusal can carry it. The reasons a proof is refused are a small fixed set
// (Reason), safe to log and to use as a metric's label; the details of an error are fixed
// texts, never the proof's content.
package dpop

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	_ "crypto/sha256" // the thumbprint's hash
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/utils/clock"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// HeaderName is the request header the proof travels in.
const HeaderName = "DPoP"

// Type is the JWS typ of a proof (RFC 9449 §4.2).
const Type = "dpop+jwt"

// Bounds on what a client sends, checked before anything is decoded, so that a hostile proof
// costs bounded memory and CPU: at most MaxProofBytes are read, at most a few dozen JSON members
// decoded, and at most one signature of a bounded key verified.
const (
	// MaxProofBytes bounds the header: an ES256 proof is about 600 bytes, an RS256 one with a
	// 4096-bit key about 1,900.
	MaxProofBytes = 4096
	// MaxIDLength bounds jti: 64 characters hold any UUID or 256 random bits in base64url.
	MaxIDLength = 64
	// maxHeaderMembers bounds the JWS header's members (typ, alg, jwk, kid).
	maxHeaderMembers = 4
	// maxKeyMembers bounds the jwk's members (kty, crv, x, y or n, e, and alg, use, kid, key_ops).
	maxKeyMembers = 10
	// maxClaims bounds the claims: the five a proof needs, and room for RFC 9449's nonce and a
	// few of a client library's own.
	maxClaims = 16
	// minRSABits and maxRSABits bound an RS256 key: below 2048 bits is weak, above 4096 is a
	// hostile client's way to make each verification cost more.
	minRSABits = 2048
	maxRSABits = 4096
)

// algorithms are the signature algorithms a proof may use: asymmetric only (RFC 9449 §4.3
// refuses none and MAC algorithms, whose key the server would have to share).
var algorithms = []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA, jose.RS256}

// Reason is why a proof was refused: one of a small fixed set, safe to log and to use as a
// metric's label.
type Reason string

// The reasons a proof is refused.
const (
	// ReasonMalformed: missing, too large, not a compact JWS, not JSON, a member missing or of
	// the wrong type or out of bounds, a jwk with private key material or of a key refused.
	ReasonMalformed Reason = "malformed"
	// ReasonWrongType: the JWS typ is not dpop+jwt (a token of another kind presented as a proof).
	ReasonWrongType Reason = "wrong_type"
	// ReasonAlgorithm: alg is none, a MAC, or an algorithm not accepted here.
	ReasonAlgorithm Reason = "unsupported_algorithm"
	// ReasonWrongKey: the jwk is not the public key the API key is bound to.
	ReasonWrongKey Reason = "wrong_key"
	// ReasonBadSignature: the signature does not verify with the jwk.
	ReasonBadSignature Reason = "bad_signature"
	// ReasonWrongMethod: htm is not the request's method.
	ReasonWrongMethod Reason = "wrong_method"
	// ReasonWrongURL: htu is not the request's URL.
	ReasonWrongURL Reason = "wrong_url"
	// ReasonStale: iat is outside the window around now, or older than the replay cache can
	// still vouch for this key.
	ReasonStale Reason = "stale"
	// ReasonReplayed: the proof's id was accepted before within the window.
	ReasonReplayed Reason = "replayed"
	// ReasonWrongTokenHash: ath is not the hash of the API key the proof was presented with.
	ReasonWrongTokenHash Reason = "wrong_token_hash"
)

// Reasons are every Reason, for a metric to bind its series up front.
var Reasons = []Reason{ReasonMalformed, ReasonWrongType, ReasonAlgorithm, ReasonWrongKey, ReasonBadSignature,
	ReasonWrongMethod, ReasonWrongURL, ReasonStale, ReasonReplayed, ReasonWrongTokenHash}

// Refusal is the error of a proof refused: its reason and a fixed detail, never the proof's
// content or the API key.
type Refusal struct {
	Reason Reason
	detail string
}

func (r *Refusal) Error() string { return "dpop proof refused: " + string(r.Reason) + ": " + r.detail }

// ReasonOf returns the reason err refused a proof, or "" when err is not a Refusal.
func ReasonOf(err error) Reason {
	if r, ok := errors.AsType[*Refusal](err); ok {
		return r.Reason
	}
	return ""
}

func refuse(reason Reason, detail string) *Refusal { return &Refusal{Reason: reason, detail: detail} }

// Proof is a proof parsed: its public key's thumbprint and its claims.
type Proof struct {
	// Thumbprint is the RFC 7638 SHA-256 thumbprint of the proof's jwk, base64url without
	// padding: what a key is bound to.
	Thumbprint string
	// Algorithm is the JWS alg.
	Algorithm jose.SignatureAlgorithm
	// Method is htm.
	Method string
	// URL is htu as sent.
	URL string
	// IssuedAt is iat.
	IssuedAt time.Time
	// ID is jti.
	ID string
	// TokenHash is ath: base64url of the SHA-256 of the key the proof was made for.
	TokenHash string

	jws *jose.JSONWebSignature
	key *jose.JSONWebKey
}

// claims are a proof's claims (RFC 9449 §4.2); a nil field was absent.
type claims struct {
	Method   *string  `json:"htm"`
	URL      *string  `json:"htu"`
	IssuedAt *float64 `json:"iat"`
	ID       *string  `json:"jti"`
	Hash     *string  `json:"ath"`
}

// FromHeader returns the proof of a request's headers: its one DPoP header (RFC 9449 §4.3
// refuses a request with more than one), or "" when it has none.
func FromHeader(h http.Header) (string, error) {
	values := h.Values(HeaderName)
	switch len(values) {
	case 0:
		return "", nil
	case 1:
		return values[0], nil
	}
	return "", refuse(ReasonMalformed, "more than one DPoP header")
}

// Parse parses a proof and verifies its signature with its own jwk: what can be checked of a
// proof without the request it came with. Verify checks the rest.
func Parse(header string) (*Proof, error) {
	p, err := parse(header)
	if err != nil {
		return nil, err
	}
	if err := p.verifySignature(); err != nil {
		return nil, err
	}
	return p, nil
}

// parse checks a proof's bounds and shape and decodes it, without verifying its signature.
func parse(header string) (*Proof, error) {
	if header == "" {
		return nil, refuse(ReasonMalformed, "no proof")
	}
	if len(header) > MaxProofBytes {
		return nil, refuse(ReasonMalformed, "proof longer than 4096 bytes")
	}
	encHeader, rest, ok := strings.Cut(header, ".")
	encClaims, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Count(header, ".") != 2 || encHeader == "" || encClaims == "" {
		return nil, refuse(ReasonMalformed, "not a compact JWS of three parts")
	}
	if err := checkHeader(encHeader); err != nil {
		return nil, err
	}
	jws, err := jose.ParseSignedCompact(header, algorithms)
	if err != nil {
		return nil, refuse(ReasonMalformed, "not a JWS the library parses")
	}
	if len(jws.Signatures) != 1 {
		return nil, refuse(ReasonMalformed, "not one signature")
	}
	// From here on the library's reading of the header is the one used, so that a header the
	// two readings would see differently (duplicate members) cannot pass one and mean another.
	h := jws.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, Type) {
		return nil, refuse(ReasonWrongType, "typ is not dpop+jwt")
	}
	alg := jose.SignatureAlgorithm(h.Algorithm)
	if err := checkKey(h.JSONWebKey, alg); err != nil {
		return nil, err
	}
	thumbprint, err := h.JSONWebKey.Thumbprint(crypto.SHA256) // RFC 7638 with SHA-256, as RFC 9449 §6.1
	if err != nil {
		return nil, refuse(ReasonMalformed, "jwk has no thumbprint")
	}
	c, err := decodeClaims(jws.UnsafePayloadWithoutVerification())
	if err != nil {
		return nil, err
	}
	return &Proof{
		Thumbprint: base64.RawURLEncoding.EncodeToString(thumbprint),
		Algorithm:  alg,
		Method:     *c.Method,
		URL:        *c.URL,
		IssuedAt:   time.Unix(int64(*c.IssuedAt), 0),
		ID:         *c.ID,
		TokenHash:  *c.Hash,
		jws:        jws,
		key:        h.JSONWebKey,
	}, nil
}

// checkHeader checks the JWS header before the JOSE library reads it: JSON of at most
// maxHeaderMembers members of those a proof has (so no certificate chain or key URL is ever
// parsed or fetched), typ dpop+jwt, an accepted alg, and a jwk of public members only.
func checkHeader(encoded string) error {
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return refuse(ReasonMalformed, "header is not base64url")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return refuse(ReasonMalformed, "header is not a JSON object")
	}
	if len(members) > maxHeaderMembers {
		return refuse(ReasonMalformed, "header has too many members")
	}
	for name := range members {
		switch name {
		case "typ", "alg", "jwk", "kid":
		default:
			return refuse(ReasonMalformed, "header has a member a proof does not carry")
		}
	}
	var typ, alg string
	if json.Unmarshal(members["typ"], &typ) != nil || !strings.EqualFold(typ, Type) {
		return refuse(ReasonWrongType, "typ is not dpop+jwt")
	}
	if json.Unmarshal(members["alg"], &alg) != nil || !acceptedAlgorithm(jose.SignatureAlgorithm(alg)) {
		return refuse(ReasonAlgorithm, "alg is not ES256, EdDSA or RS256")
	}
	var key map[string]json.RawMessage
	if members["jwk"] == nil || json.Unmarshal(members["jwk"], &key) != nil || key == nil {
		return refuse(ReasonMalformed, "header has no jwk object")
	}
	if len(key) > maxKeyMembers {
		return refuse(ReasonMalformed, "jwk has too many members")
	}
	for name := range key {
		switch name {
		case "kty", "crv", "x", "y", "n", "e", "alg", "use", "kid", "key_ops":
		case "d", "p", "q", "dp", "dq", "qi", "oth", "k":
			return refuse(ReasonMalformed, "jwk carries private key material")
		default:
			return refuse(ReasonMalformed, "jwk has a member a public key does not carry")
		}
	}
	return nil
}

func acceptedAlgorithm(alg jose.SignatureAlgorithm) bool {
	for _, a := range algorithms {
		if a == alg {
			return true
		}
	}
	return false
}

// checkKey checks that key is a public key of the kind alg signs with, of a bounded size.
func checkKey(key *jose.JSONWebKey, alg jose.SignatureAlgorithm) error {
	if key == nil || !key.Valid() || !key.IsPublic() {
		return refuse(ReasonMalformed, "jwk is not a valid public key")
	}
	switch k := key.Key.(type) {
	case *ecdsa.PublicKey:
		if alg != jose.ES256 || k.Curve != elliptic.P256() {
			return refuse(ReasonMalformed, "jwk is not a P-256 key for ES256")
		}
	case ed25519.PublicKey:
		if alg != jose.EdDSA {
			return refuse(ReasonMalformed, "jwk is not an Ed25519 key for EdDSA")
		}
	case *rsa.PublicKey:
		if alg != jose.RS256 {
			return refuse(ReasonMalformed, "jwk is not an RSA key for RS256")
		}
		if bits := k.N.BitLen(); bits < minRSABits || bits > maxRSABits {
			return refuse(ReasonMalformed, "jwk is an RSA key outside 2048 to 4096 bits")
		}
		if k.E < 3 || k.E > math.MaxInt32 || k.E%2 == 0 {
			return refuse(ReasonMalformed, "jwk is an RSA key with an unusual exponent")
		}
	default:
		return refuse(ReasonMalformed, "jwk is of a key type not accepted")
	}
	return nil
}

// decodeClaims decodes a proof's claims: a JSON object of at most maxClaims members, with htm,
// htu, iat, jti (at most MaxIDLength characters) and ath present and of their types.
func decodeClaims(payload []byte) (*claims, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(payload, &members); err != nil {
		return nil, refuse(ReasonMalformed, "claims are not a JSON object")
	}
	if len(members) > maxClaims {
		return nil, refuse(ReasonMalformed, "too many claims")
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, refuse(ReasonMalformed, "a claim is of the wrong type")
	}
	switch {
	case c.Method == nil || *c.Method == "":
		return nil, refuse(ReasonMalformed, "no htm")
	case c.URL == nil || *c.URL == "":
		return nil, refuse(ReasonMalformed, "no htu")
	case c.IssuedAt == nil:
		return nil, refuse(ReasonMalformed, "no iat")
	case *c.IssuedAt < 0 || *c.IssuedAt > maxIssuedAt:
		return nil, refuse(ReasonMalformed, "iat out of range")
	case c.ID == nil || *c.ID == "":
		return nil, refuse(ReasonMalformed, "no jti")
	case len(*c.ID) > MaxIDLength:
		return nil, refuse(ReasonMalformed, "jti longer than 64 characters")
	case c.Hash == nil || *c.Hash == "":
		return nil, refuse(ReasonMalformed, "no ath")
	}
	return &c, nil
}

// maxIssuedAt bounds iat to a time.Unix can hold without overflow (the year 9999).
const maxIssuedAt = 253402300799

func (p *Proof) verifySignature() error {
	if _, err := p.jws.Verify(p.key); err != nil {
		return refuse(ReasonBadSignature, "signature does not verify with the jwk")
	}
	return nil
}

// Request is what a proof is checked against: the request it came with and the binding of the
// key it came with.
type Request struct {
	// Method is the request's method.
	Method string
	// URL is the request's URL as the client addressed it (scheme, host, path; a query and a
	// fragment are ignored), reconstructed by the caller where a proxy stands in front.
	URL string
	// KeyHash is the SHA-256 of the API key the request presents.
	KeyHash apikey.Hash
	// Thumbprint is the RFC 7638 SHA-256 thumbprint, base64url, of the public key the API key
	// is bound to.
	Thumbprint string
	// Thumbprints are more public keys the API key is bound to, any of which may sign the proof.
	Thumbprints []string
}

// bound says the proof's thumbprint is one r binds, comparing in constant time.
func (r *Request) bound(thumbprint string) bool {
	found := r.Thumbprint != "" && subtle.ConstantTimeCompare([]byte(thumbprint), []byte(r.Thumbprint)) == 1
	for _, t := range r.Thumbprints {
		found = found || t != "" && subtle.ConstantTimeCompare([]byte(thumbprint), []byte(t)) == 1
	}
	return found
}

// Options configure a Verifier.
type Options struct {
	// Clock is the time proofs are checked against; the real clock when nil.
	Clock clock.PassiveClock
	// Window is how far iat may be from now, either side; 60 s when zero.
	Window time.Duration
	// Replay bounds the replay cache; see ReplayOptions.
	Replay ReplayOptions
}

// DefaultWindow is how far a proof's iat may be from now when Options.Window is zero.
const DefaultWindow = 60 * time.Second

// Verifier verifies proofs against requests, and remembers the ids it accepted.
type Verifier struct {
	clock  clock.PassiveClock
	window time.Duration
	seen   *ReplayCache
}

// NewVerifier returns a Verifier with its own replay cache.
func NewVerifier(o Options) *Verifier {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	return &Verifier{clock: o.Clock, window: o.Window, seen: NewReplayCache(o.Window, o.Replay)}
}

// Verify checks header, the proof a request came with, against r: its bounds and shape, its
// jwk is the bound key (before its signature is verified, so a proof of another key costs no
// verification), its signature, method, URL, time and key hash, and last that its id was not
// accepted before, so that only proofs otherwise valid take a place in the replay cache.
func (v *Verifier) Verify(header string, r Request) (*Proof, error) {
	p, err := parse(header)
	if err != nil {
		return nil, err
	}
	if !r.bound(p.Thumbprint) {
		return nil, refuse(ReasonWrongKey, "jwk is not the key bound")
	}
	if err := p.verifySignature(); err != nil {
		return nil, err
	}
	if p.Method != r.Method {
		return nil, refuse(ReasonWrongMethod, "htm is not the request's method")
	}
	want, err := NormalizeURL(r.URL)
	if err != nil {
		return nil, refuse(ReasonWrongURL, "the request's URL is not an absolute http(s) URL")
	}
	if got, err := NormalizeURL(p.URL); err != nil || got != want {
		return nil, refuse(ReasonWrongURL, "htu is not the request's URL")
	}
	now := v.clock.Now()
	if p.IssuedAt.Before(now.Add(-v.window)) {
		return nil, refuse(ReasonStale, "iat is older than the window")
	}
	if p.IssuedAt.After(now.Add(v.window)) {
		return nil, refuse(ReasonStale, "iat is later than the window")
	}
	wantHash := base64.RawURLEncoding.EncodeToString(r.KeyHash[:])
	if subtle.ConstantTimeCompare([]byte(p.TokenHash), []byte(wantHash)) != 1 {
		return nil, refuse(ReasonWrongTokenHash, "ath is not the hash of the key presented")
	}
	if err := v.seen.Add(p.Thumbprint, p.ID, p.IssuedAt, now); err != nil {
		return nil, err
	}
	return p, nil
}

// TokenHash returns the ath of a proof made for the key whose SHA-256 is h.
func TokenHash(h apikey.Hash) string { return base64.RawURLEncoding.EncodeToString(h[:]) }
