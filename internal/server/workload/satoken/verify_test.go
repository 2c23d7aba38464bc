//go:build !unit

package satoken_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/server/workload/satoken"
)

// refused fails the test unless token is refused for want, with an error that does not hold it.
func refused(t *testing.T, v *satoken.Verifier, token string, want satoken.Reason) {
	t.Helper()
	w, err := v.Verify(ctxFor(t), token)
	if err == nil {
		t.Fatalf("accepted as %+v; want refused: %s", w, want)
	}
	if got := satoken.ReasonOf(err); got != want {
		t.Fatalf("refused for %q (%v); want %q", got, err, want)
	}
	if w != (satoken.Workload{}) {
		t.Errorf("a refusal returned a workload: %+v", w)
	}
	for _, part := range strings.Split(token, ".") {
		if len(part) >= 8 && strings.Contains(err.Error(), part) {
			t.Errorf("the error holds part of the token: %v", err)
		}
	}
}

func TestValidTokenNamesItsWorkload(t *testing.T) {
	w := newWorkload(t)
	tok := w.token(t, audience)
	clk := clocktesting.NewFakeClock(issuedAt(t, tok))
	v, _ := newVerifier(t, clk, satoken.Options{})
	got, err := v.Verify(ctxFor(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	want := satoken.Workload{Namespace: w.ns, ServiceAccount: w.sa.Name, ServiceAccountUID: w.sa.UID,
		Pod: w.pod.Name, PodUID: w.pod.UID, Node: w.node.Name}
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if id := got.SPIFFEID("cluster.local"); id != "spiffe://cluster.local/ns/"+w.ns+"/sa/consumer" {
		t.Errorf("SPIFFE ID %s", id)
	}
}

func TestTokenForAnotherAudienceIsRefused(t *testing.T) {
	w := newWorkload(t)
	tok := w.token(t, "vault.example")
	v, _ := newVerifier(t, clocktesting.NewFakeClock(issuedAt(t, tok)), satoken.Options{})
	refused(t, v, tok, satoken.ReasonWrongAudience)
	// Nor is a token for the API server itself (the default audience).
	tok = w.token(t, "https://kubernetes.default.svc.cluster.local")
	refused(t, v, tok, satoken.ReasonWrongAudience)
}

func TestTimesOnTheClock(t *testing.T) {
	w := newWorkload(t)
	tok := w.token(t, audience)
	iat := issuedAt(t, tok)
	exp := iat.Add(600 * time.Second)
	clk := clocktesting.NewFakeClock(iat)
	v, _ := newVerifier(t, clk, satoken.Options{Leeway: 10 * time.Second})

	t.Run("before iat and nbf, past the leeway", func(t *testing.T) {
		clk.SetTime(iat.Add(-11 * time.Second))
		refused(t, v, tok, satoken.ReasonNotYetValid)
	})
	t.Run("within the leeway of exp", func(t *testing.T) {
		clk.SetTime(exp.Add(9 * time.Second))
		if _, err := v.Verify(ctxFor(t), tok); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("past exp and the leeway, cached", func(t *testing.T) {
		clk.SetTime(exp.Add(11 * time.Second))
		refused(t, v, tok, satoken.ReasonExpired)
	})
	t.Run("past exp, first sight", func(t *testing.T) {
		fresh, _ := newVerifier(t, clk, satoken.Options{Leeway: 10 * time.Second})
		refused(t, fresh, tok, satoken.ReasonExpired)
	})
}

func TestTokenOfADeletedPodIsRefused(t *testing.T) {
	w := newWorkload(t)
	seen, unseen := w.token(t, audience), w.token(t, audience)
	v, _ := newVerifier(t, clocktesting.NewFakeClock(issuedAt(t, seen)), satoken.Options{})
	if _, err := v.Verify(ctxFor(t), seen); err != nil {
		t.Fatal(err)
	}
	w.deletePod(t)
	refused(t, v, seen, satoken.ReasonPodGone)   // cached
	refused(t, v, unseen, satoken.ReasonPodGone) // first sight
	if n := v.Cached(); n != 0 {
		t.Errorf("%d tokens of a deleted pod still cached", n)
	}
}

func TestTokenOfAPodRecreatedWithItsNameIsRefused(t *testing.T) {
	w := newWorkload(t)
	old := w.token(t, audience)
	v, _ := newVerifier(t, clocktesting.NewFakeClock(issuedAt(t, old)), satoken.Options{})
	if _, err := v.Verify(ctxFor(t), old); err != nil {
		t.Fatal(err)
	}
	w.deletePod(t)
	w.createPod(t)
	refused(t, v, old, satoken.ReasonPodGone)
	// The new pod's own token is good.
	if got, err := v.Verify(ctxFor(t), w.token(t, audience)); err != nil || got.PodUID != w.pod.UID {
		t.Fatalf("the recreated pod's token: %+v, %v", got, err)
	}
}

func TestForgedTokensAreRefused(t *testing.T) {
	w := newWorkload(t)
	tok := w.token(t, audience)
	clk := clocktesting.NewFakeClock(issuedAt(t, tok))
	v, fetches := newVerifier(t, clk, satoken.Options{RefetchInterval: 10 * time.Second})
	parts := strings.Split(tok, ".")
	header := decodeJSON(t, parts[0])
	kid := header["kid"].(string)
	claims := payload(t, tok)

	t.Run("a tampered signature", func(t *testing.T) {
		// Another base64url character in the middle: all its 6 bits are signature bits (only the
		// last character's may be padding), so the signature decodes to other bytes.
		sig := []byte(parts[2])
		if sig[len(sig)/2] == 'A' {
			sig[len(sig)/2] = 'B'
		} else {
			sig[len(sig)/2] = 'A'
		}
		refused(t, v, parts[0]+"."+parts[1]+"."+string(sig), satoken.ReasonBadSignature)
	})
	t.Run("tampered claims", func(t *testing.T) {
		other := clone(claims)
		other["kubernetes.io"].(map[string]any)["namespace"] = "kube-system"
		refused(t, v, parts[0]+"."+encodeJSON(t, other)+"."+parts[2], satoken.ReasonBadSignature)
	})
	t.Run("alg none", func(t *testing.T) {
		none := encodeJSON(t, map[string]any{"alg": "none", "kid": kid})
		refused(t, v, none+"."+parts[1]+".", satoken.ReasonBadSignature)
	})
	t.Run("HMAC keyed with the cluster's public key", func(t *testing.T) {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(parts[0])},
			(&jose.SignerOptions{}).WithHeader("kid", kid))
		if err != nil {
			t.Fatal(err)
		}
		refused(t, v, sign(t, signer, claims), satoken.ReasonBadSignature)
	})
	t.Run("another cluster's key under this cluster's key id", func(t *testing.T) {
		refused(t, v, sign(t, rsaSigner(t, kid), claims), satoken.ReasonBadSignature)
	})
	t.Run("another cluster's key of its own id", func(t *testing.T) {
		// An unknown key id fetches the keys again, once the last fetch is RefetchInterval old.
		clk.Step(10 * time.Second)
		before := fetches.count.Load()
		refused(t, v, sign(t, rsaSigner(t, "another-cluster"), claims), satoken.ReasonUnknownKey)
		refused(t, v, sign(t, rsaSigner(t, "a-third-cluster"), claims), satoken.ReasonUnknownKey)
		if n := fetches.count.Load() - before; n != 1 {
			t.Errorf("two unknown key ids within RefetchInterval made %d fetches; want 1", n)
		}
	})
	t.Run("an ES256 key of another cluster", func(t *testing.T) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid))
		if err != nil {
			t.Fatal(err)
		}
		refused(t, v, sign(t, signer, claims), satoken.ReasonBadSignature)
	})
	t.Run("not a token", func(t *testing.T) {
		for _, bad := range []string{"", "key", "a.b", "a.b.c.d", "!!!.e30.", parts[0] + ".not-base64!." + parts[2],
			strings.Repeat("a", satoken.MaxTokenBytes+1)} {
			refused(t, v, bad, satoken.ReasonMalformed)
		}
	})
}

// A token the cluster signed but not bound to a pod names no pod to check: refused.
func TestTokenNotBoundToAPodIsRefused(t *testing.T) {
	w := newWorkload(t)
	tr, err := clientset.CoreV1().ServiceAccounts(w.ns).CreateToken(ctxFor(t), w.sa.Name, tokenRequest(audience, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := newVerifier(t, clocktesting.NewFakeClock(issuedAt(t, tr.Status.Token)), satoken.Options{})
	refused(t, v, tr.Status.Token, satoken.ReasonNotPodBound)
}

func rsaSigner(t *testing.T, kid string) jose.Signer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

func sign(t testing.TB, signer jose.Signer, claims map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(raw)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeJSON(t testing.TB, part string) map[string]any {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func encodeJSON(t testing.TB, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

func clone(claims map[string]any) map[string]any {
	raw, _ := json.Marshal(claims)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}
