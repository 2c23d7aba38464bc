package satoken

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// The API server's OIDC discovery of its ServiceAccount issuer, served to authenticated clients
// (the default system:service-account-issuer-discovery binding lets every ServiceAccount read
// it). The key set is read from the API server itself, not from the discovery's jwks_uri, which
// a cluster may point elsewhere (--service-account-jwks-uri).
const (
	discoveryPath = "/.well-known/openid-configuration"
	jwksPath      = "/openid/v1/jwks"
	// maxDocument bounds what is read of either document: a cluster publishes a few keys.
	maxDocument = 1 << 20
	// minRSABits refuses RSA keys too short to trust; the API server's are 2048 bits or more.
	minRSABits = 2048
)

// keySet is what one fetch found: the issuer and the signing keys by key id.
type keySet struct {
	issuer    string
	keys      map[string]jose.JSONWebKey
	fetchedAt time.Time
}

// keySource holds the cluster's published keys and fetches them again when asked for a key it
// lacks, or when they are older than maxAge, at most once per minInterval whatever the number
// of tokens asking: a flood of tokens naming unknown keys costs the API server nothing more.
type keySource struct {
	client      rest.Interface
	clock       clock.PassiveClock
	minInterval time.Duration
	maxAge      time.Duration

	current atomic.Pointer[keySet]
	fetches atomic.Int64

	mu          sync.Mutex // serialises fetches
	lastAttempt time.Time
	lastErr     error
}

// refresh fetches the key set unless one was attempted less than minInterval ago, and returns
// the current set (nil while none was ever fetched) with the last fetch's error. Without wait,
// it returns the current set at once when another fetch is under way.
func (s *keySource) refresh(ctx context.Context, force, wait bool) (*keySet, error) {
	if wait {
		s.mu.Lock()
	} else if !s.mu.TryLock() {
		return s.current.Load(), nil
	}
	defer s.mu.Unlock()
	now := s.clock.Now()
	if !force && !s.lastAttempt.IsZero() && now.Sub(s.lastAttempt) < s.minInterval {
		return s.current.Load(), s.lastErr
	}
	s.lastAttempt = now
	s.fetches.Add(1)
	set, err := s.fetch(ctx)
	s.lastErr = err
	if err == nil {
		set.fetchedAt = now
		s.current.Store(set)
	}
	return s.current.Load(), err
}

// key returns the key named kid and the issuer it signs for. When kid is not in the set, the
// set is fetched again (within the fetch budget) and kid looked for in the new one. When the
// set is stale it is fetched again too, but a verification that finds another fetch under way
// uses the key it has rather than wait.
func (s *keySource) key(ctx context.Context, kid string) (jose.JSONWebKey, string, error) {
	set := s.current.Load()
	if set != nil {
		if k, ok := set.keys[kid]; ok {
			if s.clock.Since(set.fetchedAt) < s.maxAge {
				return k, set.issuer, nil
			}
			if fresh, _ := s.refresh(ctx, false, false); fresh != nil {
				set = fresh
			}
			if k, ok := set.keys[kid]; ok {
				return k, set.issuer, nil
			}
			return jose.JSONWebKey{}, "", errors.New("the cluster no longer publishes this key")
		}
	}
	set, err := s.refresh(ctx, false, true)
	if set == nil {
		if err == nil {
			err = errors.New("not fetched yet")
		}
		return jose.JSONWebKey{}, "", fmt.Errorf("the cluster's keys are unavailable: %w", err)
	}
	k, ok := set.keys[kid]
	if !ok {
		return jose.JSONWebKey{}, "", errors.New("no published key has this key id")
	}
	return k, set.issuer, nil
}

func (s *keySource) fetch(ctx context.Context) (*keySet, error) {
	var discovery struct {
		Issuer string `json:"issuer"`
	}
	if err := s.get(ctx, discoveryPath, &discovery); err != nil {
		return nil, err
	}
	if discovery.Issuer == "" {
		return nil, fmt.Errorf("%s names no issuer", discoveryPath)
	}
	var jwks jose.JSONWebKeySet
	if err := s.get(ctx, jwksPath, &jwks); err != nil {
		return nil, err
	}
	set := &keySet{issuer: discovery.Issuer, keys: make(map[string]jose.JSONWebKey, len(jwks.Keys))}
	for _, k := range jwks.Keys {
		if usable(k) {
			set.keys[k.KeyID] = k
		}
	}
	if len(set.keys) == 0 {
		return nil, fmt.Errorf("%s holds no usable signing key (RSA of %d bits or more, or ECDSA P-256, with a key id)", jwksPath, minRSABits)
	}
	return set, nil
}

// usable says k can verify tokens of the API server: a public RSA or P-256 key with an id, for
// signatures, of an accepted algorithm when it names one.
func usable(k jose.JSONWebKey) bool {
	if k.KeyID == "" || (k.Use != "" && k.Use != "sig") {
		return false
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		return pub.N.BitLen() >= minRSABits && (k.Algorithm == "" || k.Algorithm == string(jose.RS256))
	case *ecdsa.PublicKey:
		return pub.Curve == elliptic.P256() && (k.Algorithm == "" || k.Algorithm == string(jose.ES256))
	}
	return false
}

func (s *keySource) get(ctx context.Context, path string, into any) error {
	body, err := s.client.Get().AbsPath(path).Stream(ctx)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", path, err)
	}
	defer func() { _ = body.Close() }()
	data, err := io.ReadAll(io.LimitReader(body, maxDocument+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxDocument {
		return fmt.Errorf("%s is larger than %d bytes", path, maxDocument)
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}
