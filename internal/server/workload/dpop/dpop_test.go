package dpop_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop"
	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop/dpoptest"
)

const (
	apiKey   = "sb_live_0123456789abcdefghijklmnopqrstuvwxyzABCD"
	otherKey = "sb_live_ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210zyxwvu"
	target   = "https://api.example.com/v1/connections"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// keys are made once: an RSA key takes a while to generate.
var (
	ecKey      = mustEC()
	otherECKey = mustEC()
	edKey      = mustEd()
	rsaKey     = mustRSA(2048)
)

func mustEC() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func mustEd() ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func mustRSA(bits int) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		panic(err)
	}
	return k
}

// claims are the claims of a proof for the request the tests make: GET target with apiKey, now.
func claims() dpoptest.Claims {
	return dpoptest.Claims{Method: "GET", URL: target, APIKey: apiKey, IssuedAt: now}
}

func request(bound crypto.PublicKey) dpop.Request {
	return dpop.Request{Method: "GET", URL: target, KeyHash: apikey.Sum(apiKey), Thumbprint: dpoptest.Thumbprint(bound)}
}

func mustMake(t testing.TB, key crypto.Signer, c dpoptest.Claims) string {
	t.Helper()
	p, err := dpoptest.Make(key, c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// forge assembles a compact JWS of header and payload, signed by sign (nil: no signature),
// for the proofs no honest library makes.
func forge(t testing.TB, header, payload any, sign func(input []byte) []byte) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(payload)
	var sig []byte
	if sign != nil {
		sig = sign([]byte(input))
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// es256 signs as ES256 does: r and s of 32 bytes each.
func es256(key *ecdsa.PrivateKey) func([]byte) []byte {
	return func(input []byte) []byte {
		digest := sha256.Sum256(input)
		r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
		if err != nil {
			panic(err)
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out
	}
}

// publicJWK is the jwk of key's public half, as a proof's header carries it.
func publicJWK(key *ecdsa.PrivateKey) map[string]any {
	point, err := key.PublicKey.Bytes() // 0x04, x, y
	if err != nil {
		panic(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	return map[string]any{"kty": "EC", "crv": "P-256", "x": b64(point[1:33]), "y": b64(point[33:])}
}

// privateJWK is the jwk of key with its private scalar d, which no proof may carry.
func privateJWK(key *ecdsa.PrivateKey) map[string]any {
	d, err := key.Bytes()
	if err != nil {
		panic(err)
	}
	jwk := publicJWK(key)
	jwk["d"] = base64.RawURLEncoding.EncodeToString(d)
	return jwk
}

func forgedClaims() map[string]any {
	return map[string]any{"htm": "GET", "htu": target, "iat": now.Unix(), "jti": "forged-1", "ath": dpoptest.TokenHash(apiKey)}
}

func TestVerify(t *testing.T) {
	smallRSA := mustRSA(1024)

	tests := []struct {
		name   string
		proof  func(t *testing.T) string
		req    func(dpop.Request) dpop.Request // nil: the request the proof was made for
		bound  crypto.PublicKey                // nil: ecKey's
		reason dpop.Reason                     // "": accepted
		detail string                          // in the error, when set
	}{
		{name: "ES256 accepted", proof: func(t *testing.T) string { return mustMake(t, ecKey, claims()) }},
		{name: "EdDSA accepted", bound: edKey.Public(),
			proof: func(t *testing.T) string { return mustMake(t, edKey, claims()) }},
		{name: "RS256 accepted", bound: &rsaKey.PublicKey,
			proof: func(t *testing.T) string { return mustMake(t, rsaKey, claims()) }},
		{name: "htu of another spelling of the same URL accepted", proof: func(t *testing.T) string {
			c := claims()
			c.URL = "HTTPS://API.Example.COM:443/v1/./x/../connections?page=2#top"
			return mustMake(t, ecKey, c)
		}, req: func(r dpop.Request) dpop.Request { r.URL = target + "?page=3"; return r }},
		{name: "iat at the window's edges accepted, past", proof: func(t *testing.T) string {
			c := claims()
			c.IssuedAt = now.Add(-dpop.DefaultWindow)
			return mustMake(t, ecKey, c)
		}},
		{name: "iat at the window's edges accepted, future", proof: func(t *testing.T) string {
			c := claims()
			c.IssuedAt = now.Add(dpop.DefaultWindow)
			return mustMake(t, ecKey, c)
		}},
		{name: "kid in the header tolerated", proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": publicJWK(ecKey), "kid": "k1"}, forgedClaims(), es256(ecKey))
		}},

		{name: "wrong method", reason: dpop.ReasonWrongMethod, proof: func(t *testing.T) string { return mustMake(t, ecKey, claims()) },
			req: func(r dpop.Request) dpop.Request { r.Method = "POST"; return r }},
		{name: "method of another case", reason: dpop.ReasonWrongMethod, proof: func(t *testing.T) string {
			c := claims()
			c.Method = "get"
			return mustMake(t, ecKey, c)
		}},
		{name: "wrong path", reason: dpop.ReasonWrongURL, proof: func(t *testing.T) string { return mustMake(t, ecKey, claims()) },
			req: func(r dpop.Request) dpop.Request { r.URL = "https://api.example.com/v1/keys"; return r }},
		{name: "wrong host", reason: dpop.ReasonWrongURL, proof: func(t *testing.T) string { return mustMake(t, ecKey, claims()) },
			req: func(r dpop.Request) dpop.Request { r.URL = "https://api.example.org/v1/connections"; return r }},
		{name: "wrong scheme", reason: dpop.ReasonWrongURL, proof: func(t *testing.T) string { return mustMake(t, ecKey, claims()) },
			req: func(r dpop.Request) dpop.Request { r.URL = "http://api.example.com/v1/connections"; return r }},
		{name: "wrong port", reason: dpop.ReasonWrongURL, proof: func(t *testing.T) string { return mustMake(t, ecKey, claims()) },
			req: func(r dpop.Request) dpop.Request { r.URL = "https://api.example.com:8443/v1/connections"; return r }},
		{name: "htu not a URL", reason: dpop.ReasonWrongURL, proof: func(t *testing.T) string {
			c := claims()
			c.URL = "/v1/connections"
			return mustMake(t, ecKey, c)
		}},
		{name: "stale, too old", reason: dpop.ReasonStale, detail: "older", proof: func(t *testing.T) string {
			c := claims()
			c.IssuedAt = now.Add(-dpop.DefaultWindow - time.Second)
			return mustMake(t, ecKey, c)
		}},
		{name: "stale, from the future", reason: dpop.ReasonStale, detail: "later", proof: func(t *testing.T) string {
			c := claims()
			c.IssuedAt = now.Add(dpop.DefaultWindow + time.Second)
			return mustMake(t, ecKey, c)
		}},
		{name: "another key's hash in ath", reason: dpop.ReasonWrongTokenHash, proof: func(t *testing.T) string {
			c := claims()
			c.APIKey = otherKey
			return mustMake(t, ecKey, c)
		}},
		{name: "presented with another key", reason: dpop.ReasonWrongTokenHash, proof: func(t *testing.T) string { return mustMake(t, ecKey, claims()) },
			req: func(r dpop.Request) dpop.Request { r.KeyHash = apikey.Sum(otherKey); return r }},
		{name: "a jwk other than the bound one", reason: dpop.ReasonWrongKey, bound: &otherECKey.PublicKey,
			proof: func(t *testing.T) string { return mustMake(t, ecKey, claims()) }},
		{name: "a key bound to nothing", reason: dpop.ReasonWrongKey, proof: func(t *testing.T) string { return mustMake(t, ecKey, claims()) },
			req: func(r dpop.Request) dpop.Request { r.Thumbprint = ""; return r }},
		{name: "signed by a key other than its jwk", reason: dpop.ReasonBadSignature, proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": publicJWK(ecKey)}, forgedClaims(), es256(otherECKey))
		}},
		{name: "claims changed after signing", reason: dpop.ReasonBadSignature, proof: func(t *testing.T) string {
			p := mustMake(t, ecKey, claims())
			c := claims()
			c.Method = "POST"
			other := mustMake(t, ecKey, c)
			parts, otherParts := strings.Split(p, "."), strings.Split(other, ".")
			return parts[0] + "." + otherParts[1] + "." + parts[2]
		}, req: func(r dpop.Request) dpop.Request { r.Method = "POST"; return r }},
		{name: "alg none", reason: dpop.ReasonAlgorithm, proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "none", "jwk": publicJWK(ecKey)}, forgedClaims(), nil)
		}},
		{name: "an HMAC alg", reason: dpop.ReasonAlgorithm, proof: func(t *testing.T) string {
			secret := []byte("a secret the server would have to share, 32 bytes+")
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "HS256", "jwk": publicJWK(ecKey)}, forgedClaims(),
				func(in []byte) []byte { m := hmac.New(sha256.New, secret); m.Write(in); return m.Sum(nil) })
		}},
		{name: "private key material in jwk", reason: dpop.ReasonMalformed, detail: "private key material", proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": privateJWK(ecKey)}, forgedClaims(), es256(ecKey))
		}},
		{name: "a symmetric jwk", reason: dpop.ReasonMalformed, detail: "private key material", proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": map[string]any{"kty": "oct", "k": "c2VjcmV0"}}, forgedClaims(), es256(ecKey))
		}},
		{name: "oversized header", reason: dpop.ReasonMalformed, detail: "longer than 4096", proof: func(t *testing.T) string {
			c := claims()
			c.URL = target + "/" + strings.Repeat("a", dpop.MaxProofBytes)
			return mustMake(t, ecKey, c)
		}},
		{name: "empty", reason: dpop.ReasonMalformed, proof: func(*testing.T) string { return "" }},
		{name: "not a JWS", reason: dpop.ReasonMalformed, proof: func(*testing.T) string { return "Bearer abc" }},
		{name: "JWS JSON serialization", reason: dpop.ReasonMalformed, proof: func(*testing.T) string { return `{"payload":"e30","signatures":[]}` }},
		{name: "typ of a plain JWT", reason: dpop.ReasonWrongType, proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "JWT", "alg": "ES256", "jwk": publicJWK(ecKey)}, forgedClaims(), es256(ecKey))
		}},
		{name: "no typ", reason: dpop.ReasonWrongType, proof: func(t *testing.T) string {
			return forge(t, map[string]any{"alg": "ES256", "jwk": publicJWK(ecKey)}, forgedClaims(), es256(ecKey))
		}},
		{name: "no jwk", reason: dpop.ReasonMalformed, proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256"}, forgedClaims(), es256(ecKey))
		}},
		{name: "a certificate chain in the header", reason: dpop.ReasonMalformed, proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": publicJWK(ecKey), "x5c": []string{"MIIB"}}, forgedClaims(), es256(ecKey))
		}},
		{name: "a key URL in the header", reason: dpop.ReasonMalformed, proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jku": "https://evil.example/jwks"}, forgedClaims(), es256(ecKey))
		}},
		{name: "a P-256 key for EdDSA", reason: dpop.ReasonMalformed, proof: func(t *testing.T) string {
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "EdDSA", "jwk": publicJWK(ecKey)}, forgedClaims(), es256(ecKey))
		}},
		{name: "an RSA key of 1024 bits", reason: dpop.ReasonMalformed, detail: "2048 to 4096", bound: &smallRSA.PublicKey,
			proof: func(t *testing.T) string { return mustMake(t, smallRSA, claims()) }},
		{name: "jti longer than 64", reason: dpop.ReasonMalformed, detail: "jti", proof: func(t *testing.T) string {
			c := claims()
			c.ID = strings.Repeat("j", dpop.MaxIDLength+1)
			return mustMake(t, ecKey, c)
		}},
		{name: "no ath", reason: dpop.ReasonMalformed, detail: "ath", proof: func(t *testing.T) string {
			c := forgedClaims()
			delete(c, "ath")
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": publicJWK(ecKey)}, c, es256(ecKey))
		}},
		{name: "iat a string", reason: dpop.ReasonMalformed, proof: func(t *testing.T) string {
			c := forgedClaims()
			c["iat"] = "now"
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": publicJWK(ecKey)}, c, es256(ecKey))
		}},
		{name: "too many claims", reason: dpop.ReasonMalformed, detail: "too many", proof: func(t *testing.T) string {
			c := forgedClaims()
			for i := range 12 {
				c[string(rune('a'+i))] = i
			}
			return forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": publicJWK(ecKey)}, c, es256(ecKey))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := dpop.NewVerifier(dpop.Options{Clock: clocktesting.NewFakePassiveClock(now)})
			bound := tt.bound
			if bound == nil {
				bound = &ecKey.PublicKey
			}
			req := request(bound)
			if tt.req != nil {
				req = tt.req(req)
			}
			proof := tt.proof(t)
			p, err := v.Verify(proof, req)
			if got := dpop.ReasonOf(err); got != tt.reason {
				t.Fatalf("Verify refused for %q (%v), want %q", got, err, tt.reason)
			}
			if tt.reason == "" {
				if p.Thumbprint != req.Thumbprint {
					t.Errorf("accepted a proof of thumbprint %s, bound to %s", p.Thumbprint, req.Thumbprint)
				}
				return
			}
			if tt.detail != "" && !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("error %q does not say %q", err, tt.detail)
			}
			if strings.Contains(err.Error(), apiKey) || strings.Contains(err.Error(), dpoptest.TokenHash(apiKey)) {
				t.Errorf("error %q carries the key or its hash", err)
			}
		})
	}
}

func TestVerifyRefusesAReplay(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(now)
	v := dpop.NewVerifier(dpop.Options{Clock: clk})
	proof := mustMake(t, ecKey, claims())
	if _, err := v.Verify(proof, request(&ecKey.PublicKey)); err != nil {
		t.Fatalf("first sight: %v", err)
	}
	for _, after := range []time.Duration{0, time.Second, dpop.DefaultWindow} {
		clk.SetTime(now.Add(after))
		if _, err := v.Verify(proof, request(&ecKey.PublicKey)); dpop.ReasonOf(err) != dpop.ReasonReplayed {
			t.Errorf("the same proof %s later: %v, want refused as replayed", after, err)
		}
	}
	clk.SetTime(now.Add(dpop.DefaultWindow + time.Second))
	if _, err := v.Verify(proof, request(&ecKey.PublicKey)); dpop.ReasonOf(err) != dpop.ReasonStale {
		t.Errorf("the same proof past the window: %v, want refused as stale", err)
	}
	// Another proof of the same key, made now, is not a replay.
	c := claims()
	c.IssuedAt = clk.Now()
	if _, err := v.Verify(mustMake(t, ecKey, c), request(&ecKey.PublicKey)); err != nil {
		t.Errorf("a new proof: %v", err)
	}
}

// TestReplayIsScopedByKey: the same jti from two bound keys are two proofs.
func TestReplayIsScopedByKey(t *testing.T) {
	v := dpop.NewVerifier(dpop.Options{Clock: clocktesting.NewFakePassiveClock(now)})
	c := claims()
	c.ID = "same-id"
	if _, err := v.Verify(mustMake(t, ecKey, c), request(&ecKey.PublicKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(mustMake(t, otherECKey, c), request(&otherECKey.PublicKey)); err != nil {
		t.Errorf("another key's proof of the same id: %v", err)
	}
	if _, err := v.Verify(mustMake(t, ecKey, c), request(&ecKey.PublicKey)); dpop.ReasonOf(err) != dpop.ReasonReplayed {
		t.Errorf("the first key's id again, in a new proof: %v, want replayed", err)
	}
}

// TestARefusedProofTakesNoPlace: an id refused for any other reason is not remembered, so the
// same id in a valid proof is accepted, and a hostile proof cannot fill the cache.
func TestARefusedProofTakesNoPlace(t *testing.T) {
	v := dpop.NewVerifier(dpop.Options{Clock: clocktesting.NewFakePassiveClock(now)})
	c := claims()
	c.ID = "id-1"
	c.APIKey = otherKey
	if _, err := v.Verify(mustMake(t, ecKey, c), request(&ecKey.PublicKey)); dpop.ReasonOf(err) != dpop.ReasonWrongTokenHash {
		t.Fatalf("got %v, want wrong token hash", err)
	}
	c.APIKey = apiKey
	if _, err := v.Verify(mustMake(t, ecKey, c), request(&ecKey.PublicKey)); err != nil {
		t.Errorf("the id of a refused proof in a valid one: %v", err)
	}
}

func TestParse(t *testing.T) {
	p, err := dpop.Parse(mustMake(t, edKey, dpoptest.Claims{Method: "PUT", URL: target, APIKey: apiKey, IssuedAt: now, ID: "the-id"}))
	if err != nil {
		t.Fatal(err)
	}
	want := dpop.Proof{Thumbprint: dpoptest.Thumbprint(edKey.Public()), Algorithm: "EdDSA", Method: "PUT", URL: target,
		IssuedAt: now, ID: "the-id", TokenHash: dpop.TokenHash(apikey.Sum(apiKey))}
	if p.Thumbprint != want.Thumbprint || p.Algorithm != want.Algorithm || p.Method != want.Method || p.URL != want.URL ||
		!p.IssuedAt.Equal(want.IssuedAt) || p.ID != want.ID || p.TokenHash != want.TokenHash {
		t.Errorf("Parse = %+v, want %+v", p, want)
	}
	forged := forge(t, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": publicJWK(ecKey)}, forgedClaims(), es256(otherECKey))
	if _, err := dpop.Parse(forged); dpop.ReasonOf(err) != dpop.ReasonBadSignature {
		t.Errorf("Parse of a proof not signed by its jwk: %v, want bad signature", err)
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example.com/v1/connections":          "https://api.example.com/v1/connections",
		"HTTPS://API.EXAMPLE.COM/v1/connections":          "https://api.example.com/v1/connections",
		"https://api.example.com:443/v1/connections":      "https://api.example.com/v1/connections",
		"http://api.example.com:80/v1":                    "http://api.example.com/v1",
		"http://api.example.com:443/v1":                   "http://api.example.com:443/v1",
		"https://api.example.com:8443/v1":                 "https://api.example.com:8443/v1",
		"https://api.example.com":                         "https://api.example.com/",
		"https://api.example.com/v1/connections?a=1#frag": "https://api.example.com/v1/connections",
		"https://api.example.com/%7Euser/%2fx%2F":         "https://api.example.com/~user/%2Fx%2F",
		"https://api.example.com/a/./b/../c":              "https://api.example.com/a/c",
		"https://api.example.com/a/%2E%2E/c":              "https://api.example.com/c",
		"https://api.example.com/..":                      "https://api.example.com/",
		"https://[2001:DB8::1]:443/v1":                    "https://[2001:db8::1]/v1",
		"https://[2001:db8::1]:8443/v1":                   "https://[2001:db8::1]:8443/v1",
		"https://api.example.com/V1":                      "https://api.example.com/V1", // a path keeps its case
	} {
		got, err := dpop.NormalizeURL(in)
		if err != nil || got != want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/v1/connections", "ftp://api.example.com/", "https://user:pw@api.example.com/", "https:///v1", "mailto:a@b"} {
		if got, err := dpop.NormalizeURL(in); err == nil {
			t.Errorf("NormalizeURL(%q) = %q, want an error", in, got)
		}
	}
}

func TestReasonsAreLabels(t *testing.T) {
	seen := map[dpop.Reason]bool{}
	for _, r := range dpop.Reasons {
		if seen[r] || r == "" || strings.ToLower(string(r)) != string(r) || strings.ContainsAny(string(r), " -.") {
			t.Errorf("reason %q: not a distinct snake_case label", r)
		}
		seen[r] = true
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, k := range []struct {
		name string
		key  crypto.Signer
	}{{"ES256", ecKey}, {"EdDSA", edKey}, {"RS256-2048", rsaKey}} {
		b.Run(k.name, func(b *testing.B) {
			// A pool of distinct proofs, verified by a new Verifier each round, so that every
			// Verify is a first sight that the replay cache records.
			const pool = 256
			proofs := make([]string, pool)
			for i := range proofs {
				proofs[i] = mustMake(b, k.key, claims())
			}
			req := request(k.key.Public())
			clk := clocktesting.NewFakePassiveClock(now)
			var v *dpop.Verifier
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b)()
			for i := range b.N {
				if i%pool == 0 {
					b.StopTimer()
					v = dpop.NewVerifier(dpop.Options{Clock: clk})
					b.StartTimer()
				}
				if _, err := v.Verify(proofs[i%pool], req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyRefused is what a proof of another key costs: refused before its signature.
func BenchmarkVerifyRefused(b *testing.B) {
	proof := mustMake(b, otherECKey, claims())
	v := dpop.NewVerifier(dpop.Options{Clock: clocktesting.NewFakePassiveClock(now)})
	req := request(&ecKey.PublicKey)
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := v.Verify(proof, req); dpop.ReasonOf(err) != dpop.ReasonWrongKey {
			b.Fatal(err)
		}
	}
}

// reportCPU reports the process's CPU time per operation, from its call to the call of the
// function it returns: on a machine shared with other work, ns/op counts the time waited for a
// core too, CPU time only the work done (and the garbage collector's share of it).
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

func TestFromHeader(t *testing.T) {
	h := http.Header{}
	if p, err := dpop.FromHeader(h); p != "" || err != nil {
		t.Errorf("no header: %q, %v", p, err)
	}
	h.Set("Dpop", "a.b.c")
	if p, err := dpop.FromHeader(h); p != "a.b.c" || err != nil {
		t.Errorf("one header: %q, %v", p, err)
	}
	h.Add("DPoP", "d.e.f")
	if _, err := dpop.FromHeader(h); dpop.ReasonOf(err) != dpop.ReasonMalformed {
		t.Errorf("two headers: %v, want malformed", err)
	}
}

// TestConcurrentCopiesAcceptedOnce: copies of one proof verified at once are accepted once.
func TestConcurrentCopiesAcceptedOnce(t *testing.T) {
	v := dpop.NewVerifier(dpop.Options{Clock: clocktesting.NewFakePassiveClock(now)})
	proof := mustMake(t, ecKey, claims())
	var accepted atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if _, err := v.Verify(proof, request(&ecKey.PublicKey)); err == nil {
				accepted.Add(1)
			} else if dpop.ReasonOf(err) != dpop.ReasonReplayed {
				t.Errorf("a copy refused for %v, want replayed", err)
			}
		})
	}
	wg.Wait()
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d copies accepted, want 1", n)
	}
}

// TestMalleatedSignatureIsAReplay: ECDSA's (r, n-s) is a second valid signature of the same
// proof; the cache remembers ids, not proofs' bytes, so the twin is a replay.
func TestMalleatedSignatureIsAReplay(t *testing.T) {
	v := dpop.NewVerifier(dpop.Options{Clock: clocktesting.NewFakePassiveClock(now)})
	proof := mustMake(t, ecKey, claims())
	i := strings.LastIndex(proof, ".")
	sig, err := base64.RawURLEncoding.DecodeString(proof[i+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("signature of %d bytes: %v", len(sig), err)
	}
	s := new(big.Int).SetBytes(sig[32:])
	s.Sub(elliptic.P256().Params().N, s)
	s.FillBytes(sig[32:])
	twin := proof[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
	if _, err := dpop.Parse(twin); err != nil {
		t.Fatalf("the twin does not verify, so this test shows nothing: %v", err)
	}
	if _, err := v.Verify(proof, request(&ecKey.PublicKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(twin, request(&ecKey.PublicKey)); dpop.ReasonOf(err) != dpop.ReasonReplayed {
		t.Errorf("the twin: %v, want replayed", err)
	}
}

func TestWindowIsConfigurable(t *testing.T) {
	v := dpop.NewVerifier(dpop.Options{Clock: clocktesting.NewFakePassiveClock(now), Window: 5 * time.Second})
	for _, tc := range []struct {
		offset time.Duration
		reason dpop.Reason
	}{{-5 * time.Second, ""}, {5 * time.Second, ""}, {-6 * time.Second, dpop.ReasonStale}, {6 * time.Second, dpop.ReasonStale}} {
		c := claims()
		c.IssuedAt = now.Add(tc.offset)
		if _, err := v.Verify(mustMake(t, ecKey, c), request(&ecKey.PublicKey)); dpop.ReasonOf(err) != tc.reason {
			t.Errorf("iat %s from now in a window of 5 s: %v, want %q", tc.offset, err, tc.reason)
		}
	}
}

// TestVerifyAnyBoundKey: a key bound to several public keys accepts a proof of any of them
// (Request.Thumbprints), and of no other.
func TestVerifyAnyBoundKey(t *testing.T) {
	v := dpop.NewVerifier(dpop.Options{Clock: clocktesting.NewFakePassiveClock(now)})
	r := dpop.Request{Method: "GET", URL: target, KeyHash: apikey.Sum(apiKey),
		Thumbprints: []string{dpoptest.Thumbprint(&otherECKey.PublicKey), dpoptest.Thumbprint(edKey.Public())}}
	for name, key := range map[string]crypto.Signer{"the first": otherECKey, "the second": edKey} {
		if _, err := v.Verify(mustMake(t, key, claims()), r); err != nil {
			t.Errorf("a proof of %s bound key: %v", name, err)
		}
	}
	if _, err := v.Verify(mustMake(t, ecKey, claims()), r); dpop.ReasonOf(err) != dpop.ReasonWrongKey {
		t.Errorf("a proof of a key not bound: %v, want wrong_key", err)
	}
	if _, err := v.Verify(mustMake(t, ecKey, claims()), dpop.Request{Method: "GET", URL: target, KeyHash: apikey.Sum(apiKey), Thumbprints: []string{""}}); dpop.ReasonOf(err) != dpop.ReasonWrongKey {
		t.Errorf("a binding of an empty thumbprint: %v, want wrong_key", err)
	}
}
