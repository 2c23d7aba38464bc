package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop/dpoptest"
	"github.com/switchboard-dev/switchboard/internal/server/workload/satoken"
)

// The "binding" part: what proving the workload adds to the check of a key bound to workloads,
// the cost issue 42 bounds (≤ 50 µs at p99 on a cached ServiceAccount token, ≤ 1 ms on first
// sight). Like the credits part it runs in this process on the server's own Checker
// (internal/server/keycheck), each call timed alone, the kinds interleaved round by round; the
// tokens are real: issued by the bench's control plane (TokenRequest, bound to a pod) and
// verified by satoken against the keys its OIDC discovery publishes, with the pods from a
// metadata informer, as the server does. A DPoP proof is never cached (each is single use), so
// every one is a first sight.

// The kinds of check the binding part measures; the first is the baseline.
const (
	bindBearer     = "bearer key (no binding)"
	bindCached     = "bound, ServiceAccount token cached"
	bindTokenFirst = "bound, ServiceAccount token first sight"
	bindDPoPFirst  = "bound, DPoP proof (ES256) first sight"
)

// bindingKinds lists the kinds in the report's order.
var bindingKinds = []string{bindBearer, bindCached, bindTokenFirst, bindDPoPFirst}

// The targets of the p99 a kind adds to the bearer key's.
const (
	bindCachedTarget = 50 * time.Microsecond
	bindFirstTarget  = time.Millisecond
)

// bindingTarget is the target of kind's added p99 and how the report writes it; 0 for the
// baseline.
func bindingTarget(kind string) (time.Duration, string) {
	switch kind {
	case bindCached:
		return bindCachedTarget, "50 µs"
	case bindTokenFirst, bindDPoPFirst:
		return bindFirstTarget, "1 ms"
	}
	return 0, ""
}

// Section 1's ratios of switchboard to the same bytes with no limits (the headline), by
// throughput and by CPU per request, in the report before issues 41 and 42 (section 1 rerun at
// c89375e): what unbound keys must not fall below.
const (
	noLimitsBeforeBinding    = 0.96
	noLimitsCPUBeforeBinding = 0.96 // the same-bytes server's CPU per request over switchboard's
	beforeBinding            = "c89375e"
)

// bindingDPoPKeys are the API keys bound to a DPoP public key each, taking turns by round: the
// replay cache remembers at most 1,024 proof ids of a public key within the proofs' window
// (more made within one second are refused), and the part sends more fresh proofs than that.
const bindingDPoPKeys = 8

// bindingResult is what the binding part measured.
type bindingResult struct {
	rounds int
	// checks is how many checks of each kind a round makes.
	checks map[string]int
	// latency holds each kind's check latencies, sorted.
	latency    map[string][]time.Duration
	indexKeys  int
	tokenAlg   string // the algorithm the control plane signs ServiceAccount tokens with
	tokenBytes int
	// minted is how many tokens were issued for the first sights, and mintTime how long the
	// control plane took to issue them (not measured in any check).
	minted   int
	mintTime time.Duration
	// keyFetches is how many times the verifier fetched the cluster's keys during the measured
	// checks (0: every check was answered without an API call); cachedAfter how many tokens it
	// held after them.
	keyFetches            int64
	cachedAfter           int
	loadBefore, loadAfter string
}

// bindingNamespace holds the bench's workload: its ServiceAccount and pod.
const bindingNamespace = "bench-binding"

func (r *rig) binding(ctx context.Context, _ options) error {
	res := &bindingResult{rounds: 20, indexKeys: creditsIndexKeys, latency: map[string][]time.Duration{},
		checks: map[string]int{bindBearer: 1000, bindCached: 1000, bindTokenFirst: 200, bindDPoPFirst: 200}}
	cfg := rest.CopyConfig(r.env.Config)
	// The first sights need a token each, issued before they are measured.
	cfg.QPS, cfg.Burst = 1000, 2000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pod, err := r.bindingWorkload(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = r.env.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) }()

	pods, err := satoken.NewPodInformer(md, bindingNamespace)
	if err != nil {
		return err
	}
	informerCtx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	go pods.Run(informerCtx)
	if err := waitFor(ctx, 30*time.Second, "the pod informer to see the workload's pod", func() bool {
		uid, ok := pods.PodUID(pod.Namespace, pod.Name)
		return ok && uid == pod.UID
	}); err != nil {
		return err
	}
	verifier, err := satoken.New(satoken.Options{Audience: "switchboard.dev", Client: kube.Discovery().RESTClient(), Pods: pods})
	if err != nil {
		return err
	}
	if err := verifier.Start(ctx); err != nil {
		return fmt.Errorf("fetching the cluster's keys: %w", err)
	}

	firstSights := res.rounds * res.checks[bindTokenFirst]
	start := time.Now()
	tokens, err := mintTokens(ctx, kube, pod, firstSights+1)
	if err != nil {
		return err
	}
	res.mintTime, res.minted = time.Since(start), len(tokens)
	cached, fresh := tokens[0], tokens[1:]
	res.tokenBytes = len(cached)
	if res.tokenAlg, err = tokenAlgorithm(cached); err != nil {
		return err
	}

	var proofKeys []*ecdsa.PrivateKey
	var thumbprints []string
	for range bindingDPoPKeys {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		proofKeys, thumbprints = append(proofKeys, k), append(thumbprints, dpoptest.Thumbprint(&k.PublicKey))
	}
	idx, secrets, err := bindingIndex(thumbprints)
	if err != nil {
		return err
	}
	c, err := newBindingChecker(idx, verifier)
	if err != nil {
		return err
	}

	const url = "http://api.example/v1/connections"
	newHTTP := func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err == nil {
			req.RemoteAddr = "192.0.2.1:1234"
		}
		return req, err
	}
	// Each kind's request as /v1 hands it over: its proofs read from its own headers. The
	// bearer key's carries the cached token too, which its decision never reads.
	bearerHTTP, err := newHTTP()
	if err != nil {
		return err
	}
	bearerHTTP.Header.Set(keycheck.HeaderWorkloadToken, cached)
	tokenHTTP, err := newHTTP()
	if err != nil {
		return err
	}
	tokenHTTP.Header.Set(keycheck.HeaderWorkloadToken, cached)
	freshHTTP, err := newHTTP()
	if err != nil {
		return err
	}
	dpopHTTP, err := newHTTP()
	if err != nil {
		return err
	}
	request := func(key string, r *http.Request) *keycheck.Request {
		return &keycheck.Request{Authorization: []string{"Bearer " + key}, Addr: netip.MustParseAddr("192.0.2.1"), AddrKnown: true,
			Audience: "connections", Method: http.MethodGet, Path: "/v1/connections", Proofs: keycheck.HTTPProofs{Request: r}}
	}

	// Warm up: the cached token verified once, each kind's code paths run.
	if _, err := timeBound(ctx, c, request(secrets[bindCached], tokenHTTP), 100, nil); err != nil {
		return fmt.Errorf("%s: %w", bindCached, err)
	}
	if _, err := timeBound(ctx, c, request(secrets[bindBearer], bearerHTTP), 100, nil); err != nil {
		return fmt.Errorf("%s: %w", bindBearer, err)
	}

	res.loadBefore = loadAverage()
	fetches, cachedBefore := verifier.KeyFetches(), verifier.Cached()
	next := 0
	for round := range res.rounds {
		dpopKey := secrets[fmt.Sprintf("%s %d", bindDPoPFirst, round%bindingDPoPKeys)]
		// Proofs are made before the round (ES256 signing is the client's work, not the
		// server's): all fresh, well within the 60 s window of their iat.
		proofs, err := makeProofs(proofKeys[round%bindingDPoPKeys], dpopKey, url, res.checks[bindDPoPFirst])
		if err != nil {
			return err
		}
		for i := range bindingKinds {
			kind := bindingKinds[(i+round)%len(bindingKinds)]
			var lat []time.Duration
			switch kind {
			case bindBearer:
				lat, err = timeBound(ctx, c, request(secrets[bindBearer], bearerHTTP), res.checks[kind], nil)
			case bindCached:
				lat, err = timeBound(ctx, c, request(secrets[bindCached], tokenHTTP), res.checks[kind], nil)
			case bindTokenFirst:
				lat, err = timeBound(ctx, c, request(secrets[bindCached], freshHTTP), res.checks[kind], func(int) {
					freshHTTP.Header[keycheck.HeaderWorkloadToken] = []string{fresh[next]}
					next++
				})
			case bindDPoPFirst:
				lat, err = timeBound(ctx, c, request(dpopKey, dpopHTTP), res.checks[kind], func(i int) {
					dpopHTTP.Header[http.CanonicalHeaderKey(keycheck.HeaderDPoP)] = []string{proofs[i]}
				})
			}
			if err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
			res.latency[kind] = append(res.latency[kind], lat...)
		}
	}
	res.loadAfter = loadAverage()
	res.keyFetches, res.cachedAfter = verifier.KeyFetches()-fetches, verifier.Cached()
	// Every fresh token was a first sight: the cache gained one entry for each.
	if gained := res.cachedAfter - cachedBefore; gained != firstSights {
		return fmt.Errorf("the verifier cached %d tokens during %d first sights: some were not first sights", gained, firstSights)
	}
	for _, lat := range res.latency {
		slices.Sort(lat)
	}
	r.report.binding = res
	return nil
}

// bindingWorkload creates the bench's ServiceAccount and pod (never run: envtest has no
// kubelet, and a token needs none).
func (r *rig) bindingWorkload(ctx context.Context) (*corev1.Pod, error) {
	if err := r.env.EnsureNamespace(ctx, bindingNamespace); err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: bindingNamespace, Name: "web"}}
	if err := client.IgnoreAlreadyExists(r.env.Client.Create(ctx, sa)); err != nil {
		return nil, err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: bindingNamespace, Name: "web-0"},
		Spec: corev1.PodSpec{ServiceAccountName: sa.Name, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
	if err := r.env.Client.Create(ctx, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// mintTokens asks the control plane for n tokens of pod's ServiceAccount bound to pod, for
// switchboard's audience, valid 10 minutes (the least it issues), all different.
func mintTokens(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod, n int) ([]string, error) {
	const workers = 8
	tokens := make([]string, n)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				tr, err := kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
					Audiences: []string{"switchboard.dev"}, ExpirationSeconds: ptr.To[int64](600),
					BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
				}}, metav1.CreateOptions{})
				if err != nil {
					errs[w] = err
					return
				}
				tokens[i] = tr.Status.Token
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("issuing tokens: %w", err)
	}
	seen := map[string]bool{}
	for _, t := range tokens {
		if seen[t] {
			return nil, errors.New("the control plane issued the same token twice: first sights would be cache hits")
		}
		seen[t] = true
	}
	return tokens, nil
}

// tokenAlgorithm is the alg of a token's header.
func tokenAlgorithm(token string) (string, error) {
	head, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return "", fmt.Errorf("a token's header: %w", err)
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", fmt.Errorf("a token's header: %w", err)
	}
	return h.Alg, nil
}

// bindingIndex is an index of creditsIndexKeys keys, the measured ones last: the bearer key, one
// bound (Enforce) to ServiceAccount web of bindingNamespace, and one bound to the public key of
// each of thumbprints; and their secrets by kind (the DPoP keys' numbered).
func bindingIndex(thumbprints []string) (*keyindex.Index, map[string]string, error) {
	type measured struct {
		name    string
		binding *keysecret.Binding
	}
	keys := []measured{{bindBearer, nil}, {bindCached, &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}}}
	for i, thumbprint := range thumbprints {
		keys = append(keys, measured{fmt.Sprintf("%s %d", bindDPoPFirst, i),
			&keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, PublicKeys: []string{thumbprint}}})
	}
	idx := keyindex.New()
	secrets := map[string]string{}
	for i := range creditsIndexKeys {
		secret, err := apikey.Generate("sb")
		if err != nil {
			return nil, nil, err
		}
		uid := types.UID(fmt.Sprintf("uid-binding-%d", i))
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: bindingNamespace, Name: string(uid), UID: uid}}
		j := i - (creditsIndexKeys - len(keys))
		switch {
		case j >= 0 && keys[j].binding != nil:
			err = keyindextest.PutBoundKey(idx, ak, secret, *keys[j].binding)
		default:
			err = keyindextest.PutKey(idx, ak, secret)
		}
		if err != nil {
			return nil, nil, err
		}
		if j >= 0 {
			secrets[keys[j].name] = secret
		}
	}
	return idx, secrets, nil
}

// newBindingChecker is a ready Checker over idx as newBenchChecker's in memory, its
// ServiceAccount tokens verified by tokens.
func newBindingChecker(idx *keyindex.Index, tokens keycheck.TokenVerifier) (*keycheck.Checker, error) {
	ready := &atomic.Bool{}
	ready.Store(true)
	return keycheck.New(keycheck.Config{Index: idx, Ready: ready, KeyPrefix: "sb", FailureRate: 1, FailureBurst: 20, FailureClients: 1024,
		Tokens: tokens, Logger: logr.Discard()})
}

// makeProofs makes n DPoP proofs of GET url for apiKey signed with key, each with its own id.
func makeProofs(key *ecdsa.PrivateKey, apiKey, url string, n int) ([]string, error) {
	proofs := make([]string, n)
	now := time.Now()
	for i := range proofs {
		p, err := dpoptest.Make(key, dpoptest.Claims{Method: http.MethodGet, URL: url, APIKey: apiKey, IssuedAt: now})
		if err != nil {
			return nil, err
		}
		proofs[i] = p
	}
	return proofs, nil
}

// timeBound makes n checks of req, each timed alone, calling prepare(i) before check i outside
// the timing (to give it a fresh proof); every one must be admitted.
func timeBound(ctx context.Context, c *keycheck.Checker, req *keycheck.Request, n int, prepare func(int)) ([]time.Duration, error) {
	lat := make([]time.Duration, n)
	for i := range lat {
		if prepare != nil {
			prepare(i)
		}
		start := time.Now()
		req.Now = c.Now(start)
		v := c.Decide(ctx, req)
		lat[i] = time.Since(start)
		if !v.Allowed() {
			return nil, fmt.Errorf("check %d refused: %d %s", i, v.Status, v.Code)
		}
	}
	return lat, nil
}

// waitFor polls cond every 20 ms until it holds, for at most timeout.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
