package satoken

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

type onePod struct{}

func (onePod) PodUID(ns, name string) (types.UID, bool) {
	if ns == "team-a" && name == "api-0" {
		return "pod-uid", true
	}
	return "", false
}

// FuzzVerify feeds Verify what a client may send: it never panics, and whatever it accepts
// names the one workload its key signed for (a token re-encoded without changing what is
// signed, such as the unused bits of base64's last character, may pass: it proves the same).
func FuzzVerify(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	const issuer = "https://oidc.cluster.example"
	now := time.Unix(1_800_000_000, 0)
	// The clock stands still, so the keys set below are never fetched again: the client reaches
	// nothing.
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		f.Fatal(err)
	}
	v, err := New(Options{Audience: "switchboard.dev", Client: cs.Discovery().RESTClient(), Pods: onePod{}, Clock: clocktesting.NewFakeClock(now)})
	if err != nil {
		f.Fatal(err)
	}
	v.keys.current.Store(&keySet{issuer: issuer, fetchedAt: now, keys: map[string]jose.JSONWebKey{"k": {Key: key.Public(), KeyID: "k"}}})
	v.keys.lastAttempt = now // no fetch in the fuzz run
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k"))
	if err != nil {
		f.Fatal(err)
	}
	claims, _ := json.Marshal(map[string]any{
		"iss": issuer, "aud": "switchboard.dev", "sub": "system:serviceaccount:team-a:api",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"kubernetes.io": map[string]any{"namespace": "team-a", "serviceaccount": map[string]any{"name": "api", "uid": "sa-uid"},
			"pod": map[string]any{"name": "api-0", "uid": "pod-uid"}},
	})
	jws, err := signer.Sign(claims)
	if err != nil {
		f.Fatal(err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		f.Fatal(err)
	}
	want := Workload{Namespace: "team-a", ServiceAccount: "api", ServiceAccountUID: "sa-uid", Pod: "api-0", PodUID: "pod-uid"}
	if got, err := v.Verify(context.Background(), token); err != nil || got != want {
		f.Fatalf("the seed: %+v, %v", got, err)
	}
	f.Add(token)
	f.Add(token[:len(token)-3])
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("..")
	f.Fuzz(func(t *testing.T, token string) {
		got, err := v.Verify(context.Background(), token)
		if err == nil && got != want {
			t.Fatalf("accepted as %+v", got)
		}
		if err != nil && ReasonOf(err) == "" {
			t.Fatalf("an error without a reason: %v", err)
		}
	})
}
