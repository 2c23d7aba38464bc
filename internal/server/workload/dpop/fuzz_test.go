package dpop_test

import (
	"crypto"
	"encoding/base64"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop"
	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop/dpoptest"
)

// FuzzParse: no input panics Parse or Verify, every refusal is a Refusal, and whatever Parse
// accepts is bounded, verifies with its own jwk by the JOSE library's own reading, has the
// thumbprint of that jwk, and is accepted by Verify for the request it names.
func FuzzParse(f *testing.F) {
	for _, key := range []crypto.Signer{ecKey, edKey, rsaKey} {
		for _, c := range []dpoptest.Claims{
			claims(),
			{Method: "POST", URL: "https://API.example.com:443/v1/a/../b?q=1", APIKey: apiKey, IssuedAt: now, ID: "x"},
		} {
			f.Add(mustMake(f, key, c))
		}
	}
	valid := mustMake(f, ecKey, claims())
	header := map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": publicJWK(ecKey)}
	for _, broken := range []string{
		"", ".", "..", "...", "a.b.c", valid[:len(valid)/2], valid + ".", strings.ToUpper(valid),
		forge(f, header, forgedClaims(), es256(ecKey)),
		forge(f, header, forgedClaims(), es256(otherECKey)),
		forge(f, map[string]any{"typ": "dpop+jwt", "alg": "none", "jwk": publicJWK(ecKey)}, forgedClaims(), nil),
		forge(f, map[string]any{"typ": "dpop+jwt", "alg": "HS256", "jwk": publicJWK(ecKey)}, forgedClaims(), es256(ecKey)),
		forge(f, map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": privateJWK(ecKey)}, forgedClaims(), es256(ecKey)),
		forge(f, map[string]any{"typ": "JWT", "alg": "ES256", "jwk": publicJWK(ecKey)}, forgedClaims(), es256(ecKey)),
		forge(f, header, map[string]any{"htm": 1, "iat": "x"}, es256(ecKey)),
		forge(f, header, []int{1, 2}, es256(ecKey)),
	} {
		f.Add(broken)
	}
	f.Fuzz(func(t *testing.T, proof string) {
		p, err := dpop.Parse(proof)
		if err != nil {
			if dpop.ReasonOf(err) == "" {
				t.Fatalf("Parse error %v is not a Refusal", err)
			}
			return
		}
		if len(proof) > dpop.MaxProofBytes || len(p.ID) > dpop.MaxIDLength || p.ID == "" {
			t.Fatalf("accepted a proof out of bounds: %d bytes, jti of %d", len(proof), len(p.ID))
		}
		jws, err := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA, jose.RS256})
		if err != nil {
			t.Fatalf("accepted a proof the library does not parse: %v", err)
		}
		jwk := jws.Signatures[0].Protected.JSONWebKey
		if jwk == nil || !jwk.IsPublic() {
			t.Fatal("accepted a proof without a public jwk")
		}
		if _, err := jws.Verify(jwk); err != nil {
			t.Fatalf("accepted a proof that does not verify with its jwk: %v", err)
		}
		if got := dpoptest.Thumbprint(jwk.Key); got != p.Thumbprint {
			t.Fatalf("thumbprint %s, the jwk's is %s", p.Thumbprint, got)
		}
		// Verify, for the request the proof names, accepts it when that request can be
		// stated: ath the hash of some key, htu an http(s) URL.
		var hash apikey.Hash
		raw, err := base64.RawURLEncoding.DecodeString(p.TokenHash)
		if err != nil || len(raw) != len(hash) || base64.RawURLEncoding.EncodeToString(raw) != p.TokenHash {
			return
		}
		copy(hash[:], raw)
		if _, err := dpop.NormalizeURL(p.URL); err != nil {
			return
		}
		v := dpop.NewVerifier(dpop.Options{Clock: clocktesting.NewFakePassiveClock(p.IssuedAt)})
		req := dpop.Request{Method: p.Method, URL: p.URL, KeyHash: hash, Thumbprint: p.Thumbprint}
		if _, err := v.Verify(proof, req); err != nil {
			t.Fatalf("Parse accepted, Verify for the request it names refused: %v", err)
		}
		if _, err := v.Verify(proof, req); dpop.ReasonOf(err) != dpop.ReasonReplayed {
			t.Fatalf("the same proof twice: %v, want replayed", err)
		}
	})
}
