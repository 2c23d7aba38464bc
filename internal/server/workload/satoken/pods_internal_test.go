package satoken

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// TestPodInformerMemory measures what the informer's store keeps per pod, for pods that carry
// what a Deployment's pods do (labels, annotations, owner, managed fields): the transform keeps
// only namespace, name, UID and resource version, whatever the pods carry.
func TestPodInformerMemory(t *testing.T) {
	const n = 10_000
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	before := heapInUse()
	for i := range n {
		kept, err := keepIdentity(typicalPod(i)) // the full object is garbage once transformed
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(kept); err != nil {
			t.Fatal(err)
		}
	}
	after := heapInUse()
	perPod := (after - before) / n
	t.Logf("the store keeps %d bytes per pod (%d pods: %.1f MiB)", perPod, n, float64(after-before)/(1<<20))
	if perPod > 1024 {
		t.Errorf("%d bytes per pod; want at most 1 KiB", perPod)
	}
	obj, ok, err := store.GetByKey("team-a/api-7d9f8c6b5-00042")
	if err != nil || !ok || obj.(*metav1.PartialObjectMetadata).UID != types.UID(fmt.Sprintf("6f1c2b9e-4d3a-4c8e-9b7a-%012d", 42)) {
		t.Fatalf("the store lost a pod: %v %v %v", obj, ok, err)
	}
	runtime.KeepAlive(store)
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// typicalPod is the metadata of a Deployment's pod as the API server sends it.
func typicalPod(i int) *metav1.PartialObjectMetadata {
	ctrl := true
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "team-a", Name: fmt.Sprintf("api-7d9f8c6b5-%05d", i),
			UID:             types.UID(fmt.Sprintf("6f1c2b9e-4d3a-4c8e-9b7a-%012d", i)),
			ResourceVersion: fmt.Sprint(1000000 + i), GenerateName: "api-7d9f8c6b5-",
			Labels:      map[string]string{"app.kubernetes.io/name": "api", "pod-template-hash": "7d9f8c6b5", "team": "a"},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-29T12:00:00Z", "prometheus.io/scrape": strings.Repeat("x", 200)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api-7d9f8c6b5",
				UID: "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", Controller: &ctrl}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(strings.Repeat("{}", 600))}},
		},
	}
}
