// Package apikey defines switchboard's API key format, "<prefix>_live_<secret>", and the few
// pure operations on it: generate, parse, checksum, hash and hint.
//
// The secret part is 43 base62 characters drawn from crypto/rand (256 bits of entropy) followed
// by a 6-character base62 CRC32 of everything before it, in the manner of GitHub's tokens: secret
// scanners and the server reject a mistyped or truncated key without a lookup.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
)

const (
	// DefaultPrefix is the prefix of keys when the operator is not told otherwise.
	DefaultPrefix = "sb"
	// LiveMarker separates the prefix from the secret part.
	LiveMarker = "_live_"
	// RandomLength is the number of random base62 characters: 43 × log2(62) ≈ 256 bits.
	RandomLength = 43
	// ChecksumLength is the number of base62 characters of the CRC32 checksum.
	ChecksumLength = 6
	// SecretLength is the length of the part after LiveMarker.
	SecretLength = RandomLength + ChecksumLength
	// MaxPrefixLength bounds the prefix so that every key fits a small stack buffer.
	MaxPrefixLength = 16
	// MaxKeyLength is the longest key any prefix can produce.
	MaxKeyLength = MaxPrefixLength + len(LiveMarker) + SecretLength

	alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// prefixPattern is what a prefix may look like: it cannot contain "_", so a key splits unambiguously.
var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,15}$`)

// Errors returned by Parse. They never contain the key.
var (
	ErrMalformed   = errors.New("api key is not of the form <prefix>_live_<secret>")
	ErrWrongPrefix = errors.New("api key has another prefix")
	ErrChecksum    = errors.New("api key checksum does not match")
)

// Hash is the SHA-256 of a whole key, the only form in which switchboard stores it.
type Hash [sha256.Size]byte

// String returns the hash in lower-case hex, as stored in hash Secrets.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash decodes a hash from its hex form.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if hex.DecodedLen(len(s)) != len(h) {
		return h, fmt.Errorf("hash must be %d hex characters, got %d", 2*len(h), len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("hash is not hex: %w", err)
	}
	return h, nil
}

// ValidatePrefix reports whether prefix can begin keys.
func ValidatePrefix(prefix string) error {
	if !prefixPattern.MatchString(prefix) {
		return fmt.Errorf("key prefix %q must be 1-%d lower-case letters and digits, starting with a letter", prefix, MaxPrefixLength)
	}
	return nil
}

// Generate returns a new key with the given prefix, its 256 random bits read from crypto/rand.
func Generate(prefix string) (string, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return "", err
	}
	buf := make([]byte, 0, len(prefix)+len(LiveMarker)+SecretLength)
	buf = append(buf, prefix...)
	buf = append(buf, LiveMarker...)
	random := make([]byte, 64)
	for n := 0; n < RandomLength; {
		if _, err := rand.Read(random); err != nil {
			return "", fmt.Errorf("reading random bytes: %w", err)
		}
		for _, b := range random {
			// Rejection sampling keeps every character uniform: 248 = 4 × 62.
			if b >= 248 || n == RandomLength {
				continue
			}
			buf = append(buf, alphabet[b%62])
			n++
		}
	}
	buf = appendChecksum(buf, crc32.ChecksumIEEE(buf))
	return string(buf), nil
}

// appendChecksum appends sum in base62, left-padded with zeros to ChecksumLength characters.
func appendChecksum(dst []byte, sum uint32) []byte {
	var digits [ChecksumLength]byte
	for i := ChecksumLength - 1; i >= 0; i-- {
		digits[i] = alphabet[sum%62]
		sum /= 62
	}
	return append(dst, digits[:]...)
}

// Parse checks that key is a well-formed key with the given prefix and a valid checksum.
// It does not allocate, so the server can call it for every request.
func Parse(key, prefix string) error {
	if len(key) != len(prefix)+len(LiveMarker)+SecretLength {
		return ErrMalformed
	}
	if key[len(prefix):len(prefix)+len(LiveMarker)] != LiveMarker {
		return ErrMalformed
	}
	if key[:len(prefix)] != prefix {
		return ErrWrongPrefix
	}
	secret := key[len(prefix)+len(LiveMarker):]
	for i := 0; i < len(secret); i++ {
		if !isBase62(secret[i]) {
			return ErrMalformed
		}
	}
	body := key[:len(key)-ChecksumLength]
	var want [ChecksumLength]byte
	appendChecksum(want[:0], crc32Update(body))
	if key[len(body):] != string(want[:]) {
		return ErrChecksum
	}
	return nil
}

// crc32Update computes the IEEE CRC32 of s, eight bytes at a time (slicing-by-8, as hash/crc32
// does without SSE 4.2). crc32.ChecksumIEEE would make its argument escape (it dispatches through
// a function value) and cost an allocation; byte at a time, the checksum was a sixth of the
// request's CPU.
func crc32Update(s string) uint32 {
	t := crcSlicing8
	crc := ^uint32(0)
	for len(s) >= 8 {
		crc ^= uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
		crc = t[0][s[7]] ^ t[1][s[6]] ^ t[2][s[5]] ^ t[3][s[4]] ^
			t[4][crc>>24] ^ t[5][(crc>>16)&0xff] ^ t[6][(crc>>8)&0xff] ^ t[7][crc&0xff]
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		crc = t[0][(crc^uint32(s[i]))&0xff] ^ (crc >> 8)
	}
	return ^crc
}

// crcSlicing8 extends crc32.IEEETable to the eight tables of slicing-by-8: entry j of a byte
// is its CRC followed by j zero bytes.
var crcSlicing8 = func() *[8][256]uint32 {
	var t [8][256]uint32
	t[0] = *crc32.IEEETable
	for i := range 256 {
		crc := t[0][i]
		for j := 1; j < 8; j++ {
			crc = t[0][crc&0xff] ^ (crc >> 8)
			t[j][i] = crc
		}
	}
	return &t
}()

func isBase62(c byte) bool {
	return ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')
}

// Sum returns the SHA-256 of key. Keys longer than MaxKeyLength are hashed too (on the heap),
// so that Sum is total; the server only hashes keys that Parse accepted.
func Sum(key string) Hash {
	var buf [MaxKeyLength]byte
	if len(key) <= len(buf) {
		n := copy(buf[:], key)
		return sha256.Sum256(buf[:n])
	}
	return sha256.Sum256([]byte(key))
}

// Hint returns a form of key that lets a person recognise it but not use it:
// the prefix, the first four and the last four characters of the secret part.
func Hint(key string) string {
	i := len(key) - SecretLength
	if i < 0 || len(key) < SecretLength {
		return "…"
	}
	secret := key[i:]
	return key[:i] + secret[:4] + "…" + secret[len(secret)-4:]
}
