//go:build !unit

package apikey_test

// Issue 18, item 4: one tenant stalled the operator for everyone. 300 Secrets labelled as reveal
// Secrets of the tenant's own APIKey cost one API GET each in every reconcile of that key, and
// re-annotating 8 APIKeys once a second woke 8 such reconciles a second: another tenant's first
// key waited 86.6 s (0.12 s without the attack).

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// secretRequests counts the requests a client makes for Secrets: all of them, and the GETs of
// one Secret by name (what the old reveal sweep made per decoy).
type secretRequests struct{ all, gets atomic.Int64 }

func (c *secretRequests) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if path := r.URL.Path; strings.Contains(path, "/secrets") {
				c.all.Add(1)
				if _, name, _ := strings.Cut(path, "/secrets/"); r.Method == http.MethodGet && name != "" && r.URL.Query().Get("watch") == "" {
					c.gets.Add(1)
				}
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTenantCannotStallTheOperator performs the attack at the scale it was reproduced, as a
// tenant with `edit`: 8 APIKeys, 300 decoy Secrets labelled as reveal Secrets of them, and an
// annotation written on each of the 8 keys every second. Then:
//   - the annotations wake no reconcile: the operator makes no Secret request while they go on;
//   - a real change of an attacked key (its spec) costs a reconcile a few Secret reads, not one
//     per decoy;
//   - another tenant's first key is issued while the attack goes on, as fast as without it.
//
// The last is measured and logged (about 0.12 s here, as without the attack; 5.6 s on the code
// before issue 18 after 5 s of attack, growing with every second of it, 86.6 s when reproduced).
// Its assertion allows 3 s, not the 1 s: the two before it are what makes it hold, and a
// shared CI machine is no stopwatch.
func TestTenantCannotStallTheOperator(t *testing.T) {
	installTenantRoles(t)
	attackerNS, victimNS, system := env.Namespace(t, "stall-a"), env.Namespace(t, "stall-b"), env.Namespace(t, "stall-system")
	requests := &secretRequests{}
	startOperatorAs(t, requests.wrap(operatorConfig(t)), nil, system, attackerNS, victimNS)
	attacker := actAs(t, attackerNS, "tenant", "edit", attackerNS)
	victim := actAs(t, victimNS, "tenant", "edit", victimNS)

	const keys, decoys = 8, 300
	var attacked []*switchboardv1alpha1.APIKey
	for i := range keys {
		key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: attackerNS, Name: fmt.Sprintf("k%d", i)}}
		if err := attacker.client.Create(testCtx(t), key); err != nil {
			t.Fatal(err)
		}
		attacked = append(attacked, key)
	}
	for _, key := range attacked {
		waitReady(t, key)
	}
	for i, key := range attacked {
		got := &switchboardv1alpha1.APIKey{}
		if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(key), got); err != nil {
			t.Fatal(err)
		}
		attacked[i] = got
	}
	target := attacked[0]
	// Decoys, spread over the 8 keys: labelled as reveal Secrets of the tenant's own keys, of
	// no generation (so "older" than any), not controlled by them.
	for i := range decoys {
		key := attacked[i%keys]
		decoy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: attackerNS, Name: fmt.Sprintf("decoy-%d", i),
			Labels: map[string]string{keysecret.LabelManagedBy: keysecret.ManagedBy, keysecret.LabelComponent: keysecret.ComponentReveal,
				keysecret.LabelAPIKeyUID: string(key.UID), keysecret.LabelAPIKeyName: key.Name}}}
		if err := attacker.client.Create(testCtx(t), decoy); err != nil {
			t.Fatal(err)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var annotations atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for n := 0; ; n++ {
			for _, key := range attacked {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"attack.example/n":"%d"}}}`, n)
				if err := attacker.client.Patch(testCtx(t), key.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err == nil {
					annotations.Add(1)
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })

	// Annotations wake nothing: no Secret request in 3 s of them (the decoys' own creation
	// events wake nothing either: they are not the key's).
	time.Sleep(time.Second)
	before, annotated := requests.all.Load(), annotations.Load()
	time.Sleep(3 * time.Second)
	if n, a := requests.all.Load()-before, annotations.Load()-annotated; n != 0 || a < keys {
		t.Fatalf("during %d annotation updates the operator made %d Secret requests, want 0", a, n)
	}

	// The victim's first key, while the attack goes on.
	start := time.Now()
	first := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: victimNS, Name: "first"}}
	if err := victim.client.Create(testCtx(t), first); err != nil {
		t.Fatal(err)
	}
	waitReady(t, first)
	took := time.Since(start)
	t.Logf("another tenant's first key was issued in %v during the attack (%d annotation updates so far)", took.Round(time.Millisecond), annotations.Load())
	if took > 3*time.Second {
		t.Fatalf("another tenant's first key took %v during the attack", took)
	}

	// A real change of the attacked key: one reconcile, whose Secret reads do not grow with the
	// decoys.
	gets := requests.gets.Load()
	poke(t, target)
	waitObserved(t, target)
	if n := requests.gets.Load() - gets; n > 4 {
		t.Fatalf("a reconcile of a key with %d decoys made %d GETs of single Secrets, want at most 4", decoys/keys, n)
	}
	for i := range decoys {
		if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: attackerNS, Name: fmt.Sprintf("decoy-%d", i)}, &corev1.Secret{}); err != nil {
			t.Fatalf("decoy %d, which the key does not control, is gone: %v", i, err)
		}
	}
}

// waitReady waits until the APIKey's key is issued (Ready=True).
func waitReady(t *testing.T, key *switchboardv1alpha1.APIKey) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "APIKey "+key.Namespace+"/"+key.Name+" to be Ready", func() error {
		got := &switchboardv1alpha1.APIKey{}
		if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(key), got); err != nil {
			return err
		}
		return hasCondition(got.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)
	})
}

// waitObserved waits until the operator has reconciled the APIKey's current generation.
func waitObserved(t *testing.T, key *switchboardv1alpha1.APIKey) {
	t.Helper()
	eventually(t, "APIKey "+key.Name+" to be observed", func() error {
		got := &switchboardv1alpha1.APIKey{}
		if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(key), got); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
		}
		return nil
	})
}
