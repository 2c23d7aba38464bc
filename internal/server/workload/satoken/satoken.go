package satoken

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unsafe"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultLeeway          = 30 * time.Second
	DefaultRefetchInterval = 10 * time.Second
	DefaultKeyMaxAge       = time.Hour
	DefaultCacheMaxAge     = 10 * time.Minute
	DefaultMaxCached       = 65536
	// MaxTokenBytes bounds a token: the API server's are about 1 KB.
	MaxTokenBytes = 16 << 10
	// maxHeaderBytes bounds a token's header, decoded before its signature is checked.
	maxHeaderBytes = 1 << 10
)

// The only algorithms the API server signs ServiceAccount tokens with: never none or HMAC, whose
// "key" would be the published public key.
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}

// Options configure a Verifier.
type Options struct {
	// Audience is switchboard's, which a token must name (as "switchboard.dev"). Required.
	Audience string
	// Client reaches the API server (as a clientset's Discovery().RESTClient()): the cluster's
	// keys and issuer are read through it. Required.
	Client rest.Interface
	// Pods says which pods live. Required.
	Pods Pods
	// Clock is the clock of times checks; clock.RealClock when nil.
	Clock clock.PassiveClock
	// Leeway is how far exp, nbf and iat may be off the clock (DefaultLeeway when 0).
	Leeway time.Duration
	// RefetchInterval is the least time between two fetches of the cluster's keys, however many
	// tokens name keys not seen (DefaultRefetchInterval when 0).
	RefetchInterval time.Duration
	// KeyMaxAge is how long fetched keys are used before they are fetched again on the next
	// token, so a key the cluster stopped publishing is dropped (DefaultKeyMaxAge when 0).
	KeyMaxAge time.Duration
	// CacheMaxAge is how long a verified token is trusted without verifying it again, if it
	// does not expire sooner (DefaultCacheMaxAge when 0).
	CacheMaxAge time.Duration
	// MaxCached bounds the verified tokens kept (DefaultMaxCached when 0). Each takes about
	// 470 bytes: 29.5 MiB for 65,536 (TestCacheMemory measures it).
	MaxCached int
}

// Workload is who presented a verified token: a pod, its ServiceAccount and its node.
type Workload struct {
	Namespace         string
	ServiceAccount    string
	ServiceAccountUID types.UID
	Pod               string
	PodUID            types.UID
	// Node is the pod's node, when the token names it (Kubernetes 1.30+ with the pod
	// scheduled); "" otherwise.
	Node string
}

// SPIFFEID is the workload's identity in the shape Istio gives it:
// spiffe://<trustDomain>/ns/<namespace>/sa/<serviceaccount>.
func (w Workload) SPIFFEID(trustDomain string) string {
	return "spiffe://" + trustDomain + "/ns/" + w.Namespace + "/sa/" + w.ServiceAccount
}

// Verifier verifies ServiceAccount tokens. It is safe for concurrent use.
type Verifier struct {
	audience    string
	pods        Pods
	clock       clock.PassiveClock
	leeway      time.Duration
	cacheMaxAge time.Duration
	keys        *keySource
	cache       *tokenCache
}

// New returns a Verifier. Start fetches the cluster's keys; until then tokens are refused
// (unknown_key) unless the first of them fetches them.
func New(opts Options) (*Verifier, error) {
	switch {
	case opts.Audience == "":
		return nil, errors.New("satoken: an audience is required")
	case opts.Client == nil:
		return nil, errors.New("satoken: a client of the API server is required")
	case opts.Pods == nil:
		return nil, errors.New("satoken: Pods is required")
	case opts.Leeway < 0 || opts.RefetchInterval < 0 || opts.KeyMaxAge < 0 || opts.CacheMaxAge < 0 || opts.MaxCached < 0:
		return nil, errors.New("satoken: durations and sizes may not be negative")
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	v := &Verifier{
		audience:    opts.Audience,
		pods:        opts.Pods,
		clock:       clk,
		leeway:      orDefault(opts.Leeway, DefaultLeeway),
		cacheMaxAge: orDefault(opts.CacheMaxAge, DefaultCacheMaxAge),
		keys: &keySource{
			client:      opts.Client,
			clock:       clk,
			minInterval: orDefault(opts.RefetchInterval, DefaultRefetchInterval),
			maxAge:      orDefault(opts.KeyMaxAge, DefaultKeyMaxAge),
		},
		cache: newCache(orDefault(opts.MaxCached, DefaultMaxCached)),
	}
	return v, nil
}

func orDefault[T time.Duration | int](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Start fetches the cluster's issuer and keys.
func (v *Verifier) Start(ctx context.Context) error {
	_, err := v.keys.refresh(ctx, true, true)
	return err
}

// KeyFetches counts the fetches of the cluster's keys so far, failed ones included.
func (v *Verifier) KeyFetches() int64 { return v.keys.fetches.Load() }

// Cached is the number of verified tokens held.
func (v *Verifier) Cached() int { return v.cache.len() }

// Verify returns the workload token was issued to, or an *Error saying why it is refused. ctx
// bounds a fetch of the cluster's keys, the only call it may make.
func (v *Verifier) Verify(ctx context.Context, token string) (Workload, error) {
	if len(token) > MaxTokenBytes {
		// Refused before it is hashed: its size is the caller's, not bounded here otherwise.
		return Workload{}, &Error{Reason: ReasonMalformed, TokenHash: "-", Detail: "longer than the largest token accepted"}
	}
	sum := tokenSum(token)
	now := v.clock.Now()
	if e, found, expired := v.cache.get(&sum, now); found {
		if err := v.alive(&sum, e.workload); err != nil {
			v.cache.drop(&sum)
			return Workload{}, err
		}
		return e.workload, nil
	} else if expired {
		return Workload{}, refuse(&sum, ReasonExpired, "past its exp")
	}
	w, expires, err := v.verify(ctx, &sum, token, now)
	if err != nil {
		return Workload{}, err
	}
	if err := v.alive(&sum, w); err != nil {
		return Workload{}, err
	}
	v.cache.put(&sum, entry{workload: w, expires: expires, until: earliest(expires, now.Add(v.cacheMaxAge))})
	return w, nil
}

// tokenSum is the SHA-256 of token, read in place: []byte(token) would copy the token to the
// heap (about 1 KB) on every verification, cached ones too.
func tokenSum(token string) [sha256.Size]byte {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token))) //nolint:gosec // read only, by a function that keeps nothing
}

func (v *Verifier) alive(sum *[sha256.Size]byte, w Workload) error {
	uid, ok := v.pods.PodUID(w.Namespace, w.Pod)
	if !ok {
		return refuse(sum, ReasonPodGone, "pod "+w.Namespace+"/"+w.Pod+" no longer exists")
	}
	if uid != w.PodUID {
		return refuse(sum, ReasonPodGone, "pod "+w.Namespace+"/"+w.Pod+" was recreated: another UID")
	}
	return nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// claims are those of a bound ServiceAccount token the checks read.
type claims struct {
	Issuer    string           `json:"iss"`
	Subject   string           `json:"sub"`
	Audience  jwt.Audience     `json:"aud"`
	Expiry    *jwt.NumericDate `json:"exp"`
	NotBefore *jwt.NumericDate `json:"nbf"`
	IssuedAt  *jwt.NumericDate `json:"iat"`
	// Kubernetes is what the API server says of the ServiceAccount and what the token is
	// bound to.
	Kubernetes *struct {
		Namespace      string `json:"namespace"`
		ServiceAccount *ref   `json:"serviceaccount"`
		Pod            *ref   `json:"pod"`
		Node           *ref   `json:"node"`
	} `json:"kubernetes.io"`
}

type ref struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// verify checks token's signature and claims, and returns its workload and expiry (with the
// leeway).
func (v *Verifier) verify(ctx context.Context, sum *[sha256.Size]byte, token string, now time.Time) (Workload, time.Time, error) {
	alg, err := headerAlgorithm(token)
	if err != nil {
		return Workload{}, time.Time{}, refuse(sum, ReasonMalformed, err.Error())
	}
	if alg != string(jose.RS256) && alg != string(jose.ES256) {
		return Workload{}, time.Time{}, refuse(sum, ReasonBadSignature, "signed with an algorithm other than RS256 or ES256")
	}
	jws, err := jose.ParseSignedCompact(token, algorithms)
	if err != nil {
		return Workload{}, time.Time{}, refuse(sum, ReasonMalformed, "not a compact JWS")
	}
	if len(jws.Signatures) != 1 {
		return Workload{}, time.Time{}, refuse(sum, ReasonMalformed, "not exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	if kid == "" {
		return Workload{}, time.Time{}, refuse(sum, ReasonUnknownKey, "names no key id")
	}
	key, issuer, err := v.keys.key(ctx, kid)
	if err != nil {
		return Workload{}, time.Time{}, refuse(sum, ReasonUnknownKey, err.Error())
	}
	if key.Algorithm != "" && key.Algorithm != alg {
		return Workload{}, time.Time{}, refuse(sum, ReasonBadSignature, "the key named is for another algorithm")
	}
	payload, err := jws.Verify(key.Key)
	if err != nil {
		return Workload{}, time.Time{}, refuse(sum, ReasonBadSignature, "the signature does not verify with the key named")
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Workload{}, time.Time{}, refuse(sum, ReasonMalformed, "claims are not a JSON object of the expected types")
	}
	if c.Issuer != issuer {
		return Workload{}, time.Time{}, refuse(sum, ReasonWrongIssuer, "not the cluster's issuer")
	}
	if !c.Audience.Contains(v.audience) {
		return Workload{}, time.Time{}, refuse(sum, ReasonWrongAudience, "not issued for "+v.audience)
	}
	if c.Expiry == nil {
		return Workload{}, time.Time{}, refuse(sum, ReasonMalformed, "no exp")
	}
	expires := c.Expiry.Time().Add(v.leeway)
	if now.After(expires) {
		return Workload{}, time.Time{}, refuse(sum, ReasonExpired, "past its exp")
	}
	if c.NotBefore != nil && now.Add(v.leeway).Before(c.NotBefore.Time()) {
		return Workload{}, time.Time{}, refuse(sum, ReasonNotYetValid, "before its nbf")
	}
	if c.IssuedAt != nil && now.Add(v.leeway).Before(c.IssuedAt.Time()) {
		return Workload{}, time.Time{}, refuse(sum, ReasonNotYetValid, "issued in the future")
	}
	k := c.Kubernetes
	if k == nil || k.Namespace == "" || k.ServiceAccount == nil || k.ServiceAccount.Name == "" || k.ServiceAccount.UID == "" {
		return Workload{}, time.Time{}, refuse(sum, ReasonMalformed, "no kubernetes.io namespace and serviceaccount")
	}
	if c.Subject != "system:serviceaccount:"+k.Namespace+":"+k.ServiceAccount.Name {
		return Workload{}, time.Time{}, refuse(sum, ReasonMalformed, "sub does not name the kubernetes.io serviceaccount")
	}
	if k.Pod == nil || k.Pod.Name == "" || k.Pod.UID == "" {
		return Workload{}, time.Time{}, refuse(sum, ReasonNotPodBound, "not bound to a pod")
	}
	w := Workload{Namespace: k.Namespace, ServiceAccount: k.ServiceAccount.Name, ServiceAccountUID: k.ServiceAccount.UID,
		Pod: k.Pod.Name, PodUID: k.Pod.UID}
	if k.Node != nil {
		w.Node = k.Node.Name
	}
	return w, expires, nil
}

// headerAlgorithm reads the alg of token's protected header, to refuse other algorithms in
// words of their own (go-jose refuses them as a parse error).
func headerAlgorithm(token string) (string, error) {
	head, _, ok := strings.Cut(token, ".")
	if !ok || strings.Count(token, ".") != 2 {
		return "", errors.New("not three dot-separated parts")
	}
	if base64.RawURLEncoding.DecodedLen(len(head)) > maxHeaderBytes {
		return "", errors.New("header too long")
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return "", errors.New("header is not base64url")
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", errors.New("header is not a JSON object")
	}
	return h.Alg, nil
}
