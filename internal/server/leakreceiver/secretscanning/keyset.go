package secretscanning

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultKeysURL is where GitHub publishes the keys that sign partner program requests.
const DefaultKeysURL = "https://api.github.com/meta/public_keys/secret_scanning"

// Defaults of KeySetOptions.
const (
	// DefaultRefreshInterval is the least time between two fetches of the keys: a flood of
	// requests naming unknown keys costs GitHub one request a minute, within its
	// unauthenticated limit (60 an hour).
	DefaultRefreshInterval = time.Minute
	// DefaultMaxKeysBody bounds GitHub's answer with the keys (a few KiB in 2026).
	DefaultMaxKeysBody = 64 << 10
	// fetchTimeout bounds a fetch of the keys, whatever the client's timeout.
	fetchTimeout = 10 * time.Second
)

// KeySetOptions configure a KeySet.
type KeySetOptions struct {
	// URL serves the keys in GitHub's format, {"public_keys":[{"key_identifier","key","is_current"}]}
	// (default DefaultKeysURL).
	URL string
	// Client fetches them (default: a client with a 10 s timeout).
	Client *http.Client
	// Token, when set, is sent as a bearer token: GitHub's documented way to stay clear of
	// the unauthenticated rate limit. It needs no scope.
	Token string
	// RefreshInterval is the least time between two fetches (default DefaultRefreshInterval).
	RefreshInterval time.Duration
	// MaxBody bounds the answer (default DefaultMaxKeysBody).
	MaxBody int64
	// Clock times the refreshes (default: the real clock).
	Clock clock.PassiveClock
}

// KeySet verifies partner program signatures with the keys GitHub publishes. It fetches them
// when it first needs them and again when a request names a key it does not know (GitHub's
// way of rotating keys), at most once per refresh interval, however many requests do.
type KeySet struct {
	opts KeySetOptions

	mu   sync.RWMutex
	keys map[string]signingKey

	// fetchMu serialises fetches, and guards the fields below: requests that find an unknown
	// key wait for the fetch in progress instead of starting their own.
	fetchMu   sync.Mutex
	fetched   bool
	lastFetch time.Time
	lastErr   error
}

// signingKey is a published key, or why it cannot verify.
type signingKey struct {
	pub *ecdsa.PublicKey
	err error
}

// NewKeySet is a key set fetching from o.URL; it fetches nothing until the first Verify.
func NewKeySet(o KeySetOptions) (*KeySet, error) {
	if o.URL == "" {
		o.URL = DefaultKeysURL
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("secret scanning keys URL %q must be an absolute http(s) URL", o.URL)
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.RefreshInterval < 0 || o.MaxBody < 0 {
		return nil, errors.New("secret scanning keys: refresh interval and body bound may not be negative")
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = DefaultRefreshInterval
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxKeysBody
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &KeySet{opts: o}, nil
}

// Verify checks that signature (the Github-Public-Key-Signature header: base64 of an ASN.1
// ECDSA signature) is the key identifier's (Github-Public-Key-Identifier) over the SHA-256 of
// body, the raw request body. Its error wraps ErrUnauthenticated, or ErrUnavailable when the
// identifier is unknown and GitHub's keys could not be fetched.
func (k *KeySet) Verify(ctx context.Context, identifier, signature string, body []byte) error {
	sig, err := parsePartnerSignature(identifier, signature)
	if err != nil {
		return err
	}
	key, err := k.key(ctx, identifier)
	if err != nil {
		return err
	}
	digest := sha256.Sum256(body)
	if !ecdsa.VerifyASN1(key, digest[:], sig) {
		return fmt.Errorf("%w: signature by key %q does not match the body", ErrUnauthenticated, identifier)
	}
	return nil
}

// key is the public key named identifier, fetching the keys if it is unknown and the last
// fetch is older than the refresh interval.
func (k *KeySet) key(ctx context.Context, identifier string) (*ecdsa.PublicKey, error) {
	if key, ok := k.lookup(identifier); ok {
		return key.usable(identifier)
	}
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	if key, ok := k.lookup(identifier); ok { // fetched while this call waited
		return key.usable(identifier)
	}
	now := k.opts.Clock.Now()
	if !k.fetched || now.Sub(k.lastFetch) >= k.opts.RefreshInterval {
		k.fetched, k.lastFetch = true, now
		// The fetch serves every request waiting for it and counts against the interval: the
		// request that started it hanging up must not cancel it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		k.lastErr = k.fetch(fctx)
		cancel()
		if key, ok := k.lookup(identifier); ok {
			return key.usable(identifier)
		}
	}
	if k.lastErr != nil {
		return nil, fmt.Errorf("%w: key %q is unknown and GitHub's keys could not be fetched: %w", ErrUnavailable, identifier, k.lastErr)
	}
	return nil, fmt.Errorf("%w: GitHub publishes no key %q", ErrUnauthenticated, identifier)
}

func (k *KeySet) lookup(identifier string) (signingKey, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	key, ok := k.keys[identifier]
	return key, ok
}

func (s signingKey) usable(identifier string) (*ecdsa.PublicKey, error) {
	if s.err != nil {
		return nil, fmt.Errorf("%w: key %q cannot verify: %w", ErrUnauthenticated, identifier, s.err)
	}
	return s.pub, nil
}

// publicKeys is GitHub's document of its secret scanning keys (DefaultKeysURL).
type publicKeys struct {
	PublicKeys []struct {
		KeyIdentifier string `json:"key_identifier"`
		Key           string `json:"key"`
		IsCurrent     bool   `json:"is_current"`
	} `json:"public_keys"`
}

// fetch replaces the keys with those GitHub publishes now; on error it keeps the old ones.
func (k *KeySet) fetch(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.opts.URL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if k.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+k.opts.Token)
	}
	body, err := get(k.opts.Client, req, k.opts.MaxBody)
	if err != nil {
		return err
	}
	var doc publicKeys
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("GET %s: not GitHub's public keys document: %w", k.opts.URL, err)
	}
	if len(doc.PublicKeys) == 0 {
		return fmt.Errorf("GET %s: no public_keys", k.opts.URL)
	}
	keys := make(map[string]signingKey, len(doc.PublicKeys))
	for _, pk := range doc.PublicKeys {
		if pk.KeyIdentifier == "" {
			continue
		}
		pub, err := parseP256(pk.Key)
		keys[pk.KeyIdentifier] = signingKey{pub: pub, err: err}
	}
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
	return nil
}

// parseP256 reads a PEM "PUBLIC KEY" that must be ECDSA on P-256, as GitHub documents
// (ECDSA-NIST-P256V1-SHA256).
func parseP256(p string) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode([]byte(p))
	if block == nil {
		return nil, errors.New("not PEM")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("not a public key: %w", err)
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not ECDSA P-256", pub)
	}
	if ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("ECDSA on %s, not P-256", ec.Curve.Params().Name)
	}
	return ec, nil
}

// get does req with c and returns the body of its 200 answer, at most limit bytes. Its error
// wraps ErrUnavailable when GitHub could not be asked or did not answer 200, ErrBadGateway when
// its answer was too large.
func get(c *http.Client, req *http.Request, limit int64) ([]byte, error) {
	body, _, err := getWithHeader(c, req, limit)
	return body, err
}

// getWithHeader is get that also returns the answer's header (its Link, for paging).
func getWithHeader(c *http.Client, req *http.Request, limit int64) ([]byte, http.Header, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%w: GET %s: %s", ErrUnavailable, req.URL.Redacted(), resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: GET %s: reading the answer: %w", ErrUnavailable, req.URL.Redacted(), err)
	}
	if int64(len(body)) > limit {
		return nil, nil, fmt.Errorf("%w: GET %s: answer larger than %d bytes", ErrBadGateway, req.URL.Redacted(), limit)
	}
	return body, resp.Header, nil
}
