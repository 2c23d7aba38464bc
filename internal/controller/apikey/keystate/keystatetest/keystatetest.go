// Package keystatetest builds, for the table tests of the APIKey controller's concerns and of
// its host, the observed states (keystate.State) they decide from: an APIKey at a generation,
// its hash Secret, revealed or delivered, at one fixed time. Only tests import it.
package keystatetest

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Now is the time the states are observed at.
var Now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// TTL is the reveal TTL the tables plan with.
const TTL = time.Hour

// Key is an APIKey with the finalizer whose status says generation gen was issued (hint
// "h<gen>", rotation "r<gen-1>" handled, reveal pending when reveal).
func Key(gen int64, reveal bool) *switchboardv1alpha1.APIKey {
	k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "ci", UID: types.UID("uid-1"),
		Finalizers: []string{switchboardv1alpha1.FinalizerAPIKey}, Generation: 3}}
	if gen > 0 {
		k.Status.KeyGeneration, k.Status.KeyHint = gen, HintOfGen(gen)
		if gen > 1 {
			k.Status.LastHandledRotationAt = RotationOfGen(gen)
			k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: RotationOfGen(gen), GracePeriod: metav1.Duration{Duration: time.Hour}}
		}
		if reveal {
			// As the status mirrors the recorded deadline (Hash).
			deadline := metav1.NewTime(Now.Add(30 * time.Minute))
			k.Status.RevealSecretName, k.Status.RevealExpiresAt = keysecret.RevealName("ci", gen), &deadline
		}
	}
	return k
}

// HintOfGen is the hint of generation gen's key in these states.
func HintOfGen(gen int64) string { return "h" + strconv.FormatInt(gen, 10) }

// RotationOfGen is the rotation that issued generation gen.
func RotationOfGen(gen int64) string { return "r" + strconv.FormatInt(gen-1, 10) }

// Hash is key's hash Secret for generation gen, recording the status's issue with a reveal
// deadline (reveal) or a delivery to spec.secretName.
func Hash(key *switchboardv1alpha1.APIKey, gen int64, reveal bool) *corev1.Secret {
	h := keysecret.NewHash(key, "system", gen, apikey.Sum(HintOfGen(gen)))
	rec := keysecret.Issued{Hint: HintOfGen(gen)}
	if gen > 1 {
		rec.RotationHandled = RotationOfGen(gen)
	}
	if reveal {
		rec.RevealExpiresAt = Now.Add(30 * time.Minute)
	} else {
		rec.Delivery = key.Spec.SecretName
	}
	keysecret.SetIssued(h, rec)
	return h
}

// State is generation 2 of an APIKey, revealed and pending, changed by f.
func State(f func(s *keystate.State)) *keystate.State {
	key := Key(2, true)
	s := &keystate.State{Key: key, Now: Now, Hash: Hash(key, 2, true), Reveal: keysecret.NewReveal(key, 2, "k2")}
	s.Reveals = []*corev1.Secret{s.Reveal}
	if f != nil {
		f(s)
	}
	return s
}

// Delivered is generation 2 delivered into app-key and held there, changed by f.
func Delivered(f func(s *keystate.State)) *keystate.State {
	return State(func(s *keystate.State) {
		s.Key.Spec.SecretName = "app-key"
		s.Key.Status.RevealSecretName = ""
		s.Hash = Hash(s.Key, 2, false)
		s.Reveal, s.Reveals = nil, nil
		s.Delivery = keysecret.NewDelivery(s.Key, 2, "k2")
		if f != nil {
			f(s)
		}
	})
}

// RunPolicies runs, for each policy of chain, its table of cases (each unpacked by unpack into
// its name, its state, whether the policy decides and with which action, by its type's name,
// "none" for none), each policy alone on the facts Observe reads with observers, at p. A policy
// without a table fails, and so does a table of no policy of chain.
func RunPolicies[C any](t *testing.T, chain keystate.Chain, p keystate.Params, tables map[string][]C,
	unpack func(C) (name string, s *keystate.State, decided bool, do string), observers ...keystate.Observer) {
	t.Helper()
	for _, pol := range chain {
		cases, ok := tables[pol.Name]
		if !ok {
			t.Errorf("policy %s has no table", pol.Name)
			continue
		}
		delete(tables, pol.Name)
		for _, tc := range cases {
			name, s, decided, do := unpack(tc)
			t.Run(pol.Name+"/"+name, func(t *testing.T) {
				in := keystate.Input{S: s, Obs: keystate.Observe(s, p, observers...), P: p}
				if s.Key == nil && pol.Name != "OrphanHashes" && pol.Name != "APIKeyGone" {
					t.Skip("policies after APIKeyGone see an APIKey")
				}
				d, got := pol.Decide(in)
				action := "none"
				if d.Do != nil {
					action = reflect.TypeOf(d.Do).Name()
				}
				if got != decided || got && action != do {
					t.Fatalf("%s decided %t (%s: %s); want %t (%s)", pol.Name, got, action, d.Why+d.Problem, decided, do)
				}
			})
		}
	}
	for name := range tables {
		t.Errorf("a table for %s, which is no policy of the chain", name)
	}
}
