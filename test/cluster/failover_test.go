//go:build cluster

package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/operator"
)

// maxTakeover is how soon the other operator replica must lead after the leader's pod is
// deleted (the bound; the Lease lasts 15 s and is released on a clean shutdown).
const maxTakeover = 20 * time.Second

// leader is the pod that holds the operator's Lease (controller-runtime's identity is the
// pod's host name, then "_" and a random suffix).
func (s *suite) leader(ctx context.Context) (string, error) {
	lease, err := s.cs.CoordinationV1().Leases(systemNamespace).Get(ctx, operator.DefaultLeaderElectionID, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return "", errors.New("the Lease has no holder")
	}
	pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return pod, nil
}

// testFailover deletes the leading operator pod while APIKeys keep being created: the other
// replica must take the Lease within maxTakeover, every key must be issued, and none twice.
func testFailover(t *testing.T) {
	ctx := context.Background()
	old, err := s.leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for _, p := range s.pods(t, "operator") {
		if p.Name != old {
			others = append(others, p.Name)
		}
	}
	if len(others) != 1 {
		t.Fatalf("the leader %s is not one of two operator pods (others: %v)", old, others)
	}
	const ns = "tenant-b"
	s.kubectl(t, "create", "namespace", ns)

	// One APIKey every 500 ms, from before the deletion until after the takeover.
	stop := make(chan struct{})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created []string
		failed  error
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("f-%03d", i)}}
			if err := s.k8s.Create(ctx, key); err != nil {
				mu.Lock()
				failed = errors.Join(failed, err)
				mu.Unlock()
				continue
			}
			mu.Lock()
			created = append(created, key.Name)
			mu.Unlock()
		}
	})
	time.Sleep(3 * time.Second)

	deleted := time.Now()
	if err := s.cs.CoreV1().Pods(systemNamespace).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var leader string
	var took time.Duration
	eventually(t, time.Minute, "a new operator leader", func() error {
		l, err := s.leader(ctx)
		if err != nil {
			return err
		}
		if l == old {
			return fmt.Errorf("%s still holds the Lease", l)
		}
		leader, took = l, time.Since(deleted)
		return nil
	})
	t.Logf("failover: %s took the Lease %s after %s was deleted", leader, took.Round(10*time.Millisecond), old)
	if took > maxTakeover {
		t.Errorf("the takeover took %s, want at most %s", took.Round(10*time.Millisecond), maxTakeover)
	}
	if leader != others[0] {
		var pods []string
		for _, p := range s.pods(t, "operator") {
			pods = append(pods, fmt.Sprintf("%s (created %s)", p.Name, p.CreationTimestamp.Format(time.RFC3339)))
		}
		t.Logf("failover: the Lease went to %s, not the standing replica %s: the replacement pod started and asked before the replica's next retry; the operator pods: %v (deleted at %s)",
			leader, others[0], pods, deleted.Format(time.RFC3339))
	}
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	if failed != nil {
		t.Fatalf("creating APIKeys during the failover: %v", failed)
	}

	// Every key issued, exactly once: generation 1, one key Secret, its hash Secret at
	// generation 1, and the one key that was revealed is the one the API accepts.
	api := s.serviceURL(t, "switchboard-api")
	spread := s.c.HTTPClient()
	spread.Transport.(*http.Transport).DisableKeepAlives = true
	var slowest time.Duration
	for _, name := range created {
		key := &switchboardv1alpha1.APIKey{}
		eventually(t, 2*time.Minute, "APIKey "+name+" issued", func() error {
			if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, key); err != nil {
				return err
			}
			if key.Status.KeyGeneration == 0 || key.Status.CreatedAt == nil {
				return errors.New("not issued yet")
			}
			return nil
		})
		if key.Status.KeyGeneration != 1 {
			t.Errorf("APIKey %s is at key generation %d, want 1: a key was issued more than once", name, key.Status.KeyGeneration)
		}
		if lag := key.Status.CreatedAt.Sub(key.CreationTimestamp.Time); lag > slowest {
			slowest = lag
		}
		secrets := &corev1.SecretList{}
		if err := s.k8s.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{keysecret.LabelAPIKeyUID: string(key.UID)}); err != nil {
			t.Fatal(err)
		}
		if len(secrets.Items) != 1 || secrets.Items[0].Name != keysecret.RevealName(name, 1) {
			var names []string
			for _, sec := range secrets.Items {
				names = append(names, sec.Name)
			}
			t.Errorf("APIKey %s has key Secrets %v, want exactly [%s-key-1]", name, names, name)
		}
		hash := &corev1.Secret{}
		if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: keysecret.HashName(key.UID)}, hash); err != nil {
			t.Errorf("APIKey %s: its hash Secret: %v", name, err)
		} else if g := hash.Labels[keysecret.LabelGeneration]; g != "1" {
			t.Errorf("APIKey %s: its hash Secret is at generation %s, want 1", name, g)
		}
		plaintext := s.claim(t, ns, name)
		s.issued = append(s.issued, plaintext)
		if r := listConnections(ctx, spread, api, plaintext); r.status != http.StatusOK {
			t.Errorf("APIKey %s: its revealed key is refused: %s", name, r)
		}
	}
	t.Logf("failover: %d APIKeys created across it, each issued once; the slowest waited %s", len(created), slowest)
}
