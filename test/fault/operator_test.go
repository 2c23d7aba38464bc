//go:build !unit

package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

const leaseName = "switchboard-operator.switchboard.dev"

func createAPIKeys(t *testing.T, ns string, n int) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	for i := range n {
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("key-%03d", i)}}
		if err := env.Client.Create(ctx, ak); err != nil {
			t.Fatal(err)
		}
	}
}

// readyCount counts the Ready APIKeys of ns.
func readyCount(ctx context.Context, ns string) (int, error) {
	var list switchboardv1alpha1.APIKeyList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, switchboardv1alpha1.ConditionReady) {
			n++
		}
	}
	return n, nil
}

// assertOneKeyEach checks every APIKey of ns: Ready, key generation 1, exactly one hash Secret,
// exactly one reveal Secret (the generation-1 one), and the hash is the SHA-256 of that key.
// So no crash produced two keys for one APIKey, lost a key nobody was shown, or left a hash
// without a key someone can claim.
func assertOneKeyEach(t *testing.T, ns string, n int) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	var list switchboardv1alpha1.APIKeyList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	hashes, err := hashSecrets(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	var reveals corev1.SecretList
	if err := env.Client.List(ctx, &reveals, client.InNamespace(ns), client.MatchingLabels{
		keysecret.LabelComponent: keysecret.ComponentReveal}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n || len(hashes) != n || len(reveals.Items) != n {
		t.Fatalf("%d APIKeys, %d hash Secrets, %d reveal Secrets; want %d of each", len(list.Items), len(hashes), len(reveals.Items), n)
	}
	hashByUID := map[string]string{}
	for _, h := range hashes {
		uid := h.Labels[keysecret.LabelAPIKeyUID]
		if _, dup := hashByUID[uid]; dup {
			t.Fatalf("two hash Secrets for APIKey UID %s", uid)
		}
		hashByUID[uid] = string(h.Data[keysecret.DataHash])
	}
	revealByUID := map[string]corev1.Secret{}
	for _, r := range reveals.Items {
		revealByUID[r.Labels[keysecret.LabelAPIKeyUID]] = r
	}
	for i := range list.Items {
		ak := &list.Items[i]
		if !meta.IsStatusConditionTrue(ak.Status.Conditions, switchboardv1alpha1.ConditionReady) || ak.Status.KeyGeneration != 1 {
			t.Errorf("%s: Ready=%v generation %d; want Ready and generation 1", ak.Name,
				meta.IsStatusConditionTrue(ak.Status.Conditions, switchboardv1alpha1.ConditionReady), ak.Status.KeyGeneration)
			continue
		}
		r, ok := revealByUID[string(ak.UID)]
		if !ok || r.Name != ak.Status.RevealSecretName {
			t.Errorf("%s: the published reveal Secret %q is missing", ak.Name, ak.Status.RevealSecretName)
			continue
		}
		key := string(r.Data[keysecret.DataKey])
		issued.add(key)
		if got := hashByUID[string(ak.UID)]; got != apikey.Sum(key).String() {
			t.Errorf("%s: the hash Secret does not hash the key in the reveal Secret", ak.Name)
		}
		if apikey.Hint(key) != ak.Status.KeyHint {
			t.Errorf("%s: status hint %q is not the revealed key's", ak.Name, ak.Status.KeyHint)
		}
	}
}

// waitAllReady waits up to 2 minutes for all n APIKeys of ns to be Ready.
func waitAllReady(t *testing.T, ns string, n int, what string) {
	t.Helper()
	testenv.Eventually(t, 120*time.Second, what, func() error {
		ready, err := readyCount(ctxFor(t, 5*time.Second), ns)
		if err == nil && ready != n {
			err = fmt.Errorf("%d of %d Ready", ready, n)
		}
		return err
	})
}

// leaseHolder returns the identity holding the operator's leader-election Lease.
func leaseHolder(ctx context.Context) (string, error) {
	var lease coordinationv1.Lease
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: leaseName}, &lease); err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}

// TestOperatorFailover: two operators with leader election; the leader is killed (SIGKILL, so
// it cannot release the Lease) while keys are being issued. The other takes over within the
// lease time, and every APIKey ends with exactly one key.
func TestOperatorFailover(t *testing.T) {
	scanAfter(t)
	ensureSystemNamespace(t)
	ns := env.Namespace(t, "failover")
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	first := startOperator(t, "operator-a", kc, "--leader-elect=true")
	var leader string
	testenv.Eventually(t, 60*time.Second, "the first operator becoming leader", func() error {
		var err error
		leader, err = leaseHolder(ctxFor(t, 5*time.Second))
		if err == nil && leader == "" {
			err = fmt.Errorf("no holder yet")
		}
		return err
	})
	startOperator(t, "operator-b", kc, "--leader-elect=true")

	const n = 150
	createAPIKeys(t, ns, n)
	testenv.Eventually(t, 60*time.Second, "the leader issuing some keys", func() error {
		ready, err := readyCount(ctxFor(t, 5*time.Second), ns)
		if err == nil && ready == 0 {
			err = fmt.Errorf("none of %d Ready yet", n)
		}
		return err
	})
	first.kill()
	killedAt := time.Now()
	readyAtKill, _ := readyCount(ctxFor(t, 5*time.Second), ns)

	testenv.Eventually(t, 60*time.Second, "the second operator taking the Lease", func() error {
		holder, err := leaseHolder(ctxFor(t, 5*time.Second))
		if err == nil && (holder == leader || holder == "") {
			err = fmt.Errorf("the Lease is still %q's", holder)
		}
		return err
	})
	takeover := time.Since(killedAt)
	waitAllReady(t, ns, n, "all keys issued after the failover")
	t.Logf("leader killed with %d of %d keys Ready; the other took the Lease after %s; all Ready after %s",
		readyAtKill, n, takeover.Round(time.Millisecond), time.Since(killedAt).Round(time.Millisecond))
	// controller-runtime's default lease is 15 s; the new leader must not need much more.
	if takeover > 30*time.Second {
		t.Errorf("takeover took %s, more than twice the 15 s lease", takeover)
	}
	assertOneKeyEach(t, ns, n)
}

// TestCrashDuringIssue: the operator is killed with SIGKILL at random moments while it issues
// keys, and restarted each time. In the end every APIKey has exactly one key, hashed, claimable.
func TestCrashDuringIssue(t *testing.T) {
	scanAfter(t)
	ensureSystemNamespace(t)
	ns := env.Namespace(t, "crash")
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	const n = 80
	createAPIKeys(t, ns, n)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)) // #nosec G404 -- timing jitter, not a secret.
	kills := 0
	for range 8 {
		op := startOperator(t, fmt.Sprintf("operator-%d", kills), kc, "--leader-elect=false")
		time.Sleep(time.Duration(800+rng.IntN(1500)) * time.Millisecond)
		op.kill()
		kills++
		if ready, err := readyCount(ctxFor(t, 5*time.Second), ns); err == nil && ready == n {
			break
		}
	}
	readyBefore, _ := readyCount(ctxFor(t, 5*time.Second), ns)
	startOperator(t, "operator-final", kc, "--leader-elect=false")
	waitAllReady(t, ns, n, "all keys issued after the crashes")
	t.Logf("%d kills; %d of %d keys were Ready before the last restart", kills, readyBefore, n)
	if readyBefore == n {
		t.Log("every key was issued before the last kill; the kills still fell mid-work for the earlier keys")
	}
	assertOneKeyEach(t, ns, n)
	// No reveal Secret of a second generation may exist: one generation, one key.
	var reveals corev1.SecretList
	if err := env.Client.List(ctxFor(t, 10*time.Second), &reveals, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range reveals.Items {
		if strings.HasSuffix(s.Name, "-key-2") {
			t.Errorf("a second key was generated: %s", s.Name)
		}
	}
}
