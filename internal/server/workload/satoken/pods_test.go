//go:build !unit

package satoken_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/metadata"

	"github.com/switchboard-dev/switchboard/internal/server/workload/satoken"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// A PodInformer of one namespace knows its pods by UID, through deletion and recreation under
// the same name, and nothing of other namespaces' pods.
func TestPodInformerOfANamespace(t *testing.T) {
	w, elsewhere := newWorkload(t), newWorkload(t)
	md, err := metadata.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	inf, err := satoken.NewPodInformer(md, w.ns)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.Run(ctx)
	testenv.Eventually(t, 10*time.Second, "the informer syncs", func() error {
		if !inf.HasSynced() {
			return errNotYet
		}
		return nil
	})
	if uid, ok := inf.PodUID(w.ns, w.pod.Name); !ok || uid != w.pod.UID {
		t.Fatalf("the namespace's pod: %q, %v; want %q", uid, ok, w.pod.UID)
	}
	if _, ok := inf.PodUID(elsewhere.ns, elsewhere.pod.Name); ok {
		t.Fatal("a pod of another namespace is known")
	}
	old := w.pod.UID
	w.deletePod(t)
	w.createPod(t)
	testenv.Eventually(t, 10*time.Second, "the informer sees the new pod", func() error {
		if uid, ok := inf.PodUID(w.ns, w.pod.Name); !ok || uid != w.pod.UID {
			return errNotYet
		}
		return nil
	})
	if w.pod.UID == old {
		t.Fatal("the recreated pod kept its UID")
	}
}
