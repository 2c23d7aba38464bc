package indexfeed

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/testenv/fixture"
)

// appliedConnection is a Connection as a watch delivers it after `kubectl apply`: managed
// fields, the last-applied annotation, labels, a credentials reference and a status.
func appliedConnection(i int) []byte {
	meta := map[string]string{}
	for j := range 10 {
		meta[fmt.Sprintf("attribute-%02d", j)] = strings.Repeat("v", 30)
	}
	spec := map[string]any{"displayName": "Warehouse " + fmt.Sprint(i), "provider": "postgres", "metadata": meta,
		"credentialsSecretRef": map[string]any{"name": "warehouse-credentials"}}
	specJSON, _ := json.Marshal(spec)
	lastApplied, _ := json.Marshal(map[string]any{"apiVersion": "switchboard.dev/v1alpha1", "kind": "Connection",
		"metadata": map[string]any{"name": fmt.Sprintf("c%05d", i), "namespace": "tenant", "labels": map[string]string{"team": "data", "env": "prod"}},
		"spec":     spec})
	obj := map[string]any{
		"apiVersion": "switchboard.dev/v1alpha1", "kind": "Connection",
		"metadata": map[string]any{
			"name": fmt.Sprintf("c%05d", i), "namespace": "tenant", "uid": fmt.Sprintf("8d0c6a1e-0000-4000-8000-%012d", i),
			"resourceVersion": "123456", "generation": 1, "creationTimestamp": "2026-11-22T04:00:00Z",
			"labels":      map[string]string{"team": "data", "env": "prod"},
			"annotations": map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(lastApplied)},
			"finalizers":  []string{"switchboard.dev/connection"},
			"managedFields": []any{
				map[string]any{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "switchboard.dev/v1alpha1", "time": "2026-11-22T04:00:00Z", "fieldsType": "FieldsV1",
					"fieldsV1": json.RawMessage(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:env":{},"f:team":{}}},"f:spec":{".":{},"f:credentialsSecretRef":{".":{},"f:name":{}},"f:displayName":{},"f:metadata":{".":{}},"f:provider":{}}}`)},
				map[string]any{"manager": "switchboard-operator", "operation": "Update", "apiVersion": "switchboard.dev/v1alpha1", "time": "2026-11-22T04:00:01Z", "fieldsType": "FieldsV1", "subresource": "status",
					"fieldsV1": json.RawMessage(`{"f:status":{".":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:id":{},"f:observedGeneration":{}}}`)},
			},
		},
		"spec": json.RawMessage(specJSON),
		"status": map[string]any{"id": fmt.Sprintf("conn_%05d", i), "observedGeneration": 1, "conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Assigned", "message": "The connection has its public id and is listed by the API.", "lastTransitionTime": "2026-11-22T04:00:01Z", "observedGeneration": 1}}},
	}
	raw, _ := json.Marshal(obj)
	return raw
}

// cacheHeap feeds n objects through a cache transform and an index feed, as the informer does,
// and returns the heap they hold per object: what the informer's store keeps after the
// transform, and the index's entries. decode(i) is the i-th object as a watch decodes it.
func cacheHeap(b *testing.B, n int, decode func(i int) (any, error), transform toolscache.TransformFunc, feed toolscache.ResourceEventHandler) float64 {
	b.Helper()
	store := make([]any, 0, n)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		obj, err := decode(i)
		if err != nil {
			b.Fatal(err)
		}
		if obj, err = transform(obj); err != nil {
			b.Fatal(err)
		}
		store = append(store, obj)
		feed.OnAdd(obj, true)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	runtime.KeepAlive(feed) // and the index it feeds
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkConnectionMemory measures the heap one cached Connection costs the server: the
// object its informer stores after the cache transform, and the index's entry.
func BenchmarkConnectionMemory(b *testing.B) {
	const n = 5000
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = appliedConnection(i)
	}
	decode := func(i int) (any, error) {
		c := &switchboardv1alpha1.Connection{}
		return c, json.Unmarshal(raws[i], c)
	}
	b.ReportAllocs()
	for b.Loop() {
		idx := keyindex.New()
		b.ReportMetric(cacheHeap(b, n, decode, compactConnection, feedConnections(idx, logr.Discard())), "heapB/conn")
		jsonBytes := 0
		for _, c := range idx.Connections("tenant").Items() {
			jsonBytes += len(c.Encoded)
		}
		b.ReportMetric(float64(jsonBytes)/n, "jsonB/conn")
		runtime.KeepAlive(idx)
	}
}

// TestCompactConnection: the cache keeps of a Connection only its identity, its labels and its
// JSON, and nothing of the credentials reference, the annotations or the managed fields.
func TestCompactConnection(t *testing.T) {
	c := fixture.Connection("a", "warehouse", "conn_1")
	c.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1000)}
	c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	c.Finalizers = []string{"switchboard.dev/connection"}
	obj, err := compactConnection(c)
	if err != nil {
		t.Fatal(err)
	}
	cc, ok := obj.(*cachedConnection)
	if !ok {
		t.Fatalf("the cache keeps a %T", obj)
	}
	if cc.Annotations != nil || cc.ManagedFields != nil || cc.Finalizers != nil || cc.Name != "warehouse" || cc.Namespace != "a" {
		t.Errorf("the cached metadata = %+v", cc.ObjectMeta)
	}
	if cc.entry == nil || cc.entry.ID != "conn_1" || cc.entry.Labels["n"] != "warehouse" || strings.Contains(string(cc.entry.Encoded), "top-secret") {
		t.Errorf("the cached Conn = %+v", cc.entry)
	}
	if again, _ := compactConnection(obj); again != obj {
		t.Error("the transform is not idempotent")
	}
	if key, err := toolscache.MetaNamespaceKeyFunc(obj); err != nil || key != "a/warehouse" {
		t.Errorf("the informer's store key = %q, %v", key, err)
	}
	c = fixture.Connection("a", "pending", "")
	if obj, _ := compactConnection(c); obj.(*cachedConnection).entry != nil {
		t.Error("a Connection without an id is listable")
	}
}

// appliedAPIKey is an APIKey as a watch delivers it after `kubectl apply` and its first key:
// managed fields, the last-applied annotation, a finalizer, a selector and a full status.
func appliedAPIKey(i int) []byte {
	name := fmt.Sprintf("key-%05d", i)
	spec := map[string]any{"description": "Invoice sync worker " + fmt.Sprint(i), "connectionSelector": map[string]any{"matchLabels": map[string]string{"team": "data"}}}
	specJSON, _ := json.Marshal(spec)
	lastApplied, _ := json.Marshal(map[string]any{"apiVersion": "switchboard.dev/v1alpha1", "kind": "APIKey",
		"metadata": map[string]any{"name": name, "namespace": "tenant"}, "spec": spec})
	cond := func(typ, reason string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": reason, "message": "The key was issued and is shown once.", "lastTransitionTime": "2026-11-22T04:00:01Z", "observedGeneration": 1}
	}
	obj := map[string]any{
		"apiVersion": "switchboard.dev/v1alpha1", "kind": "APIKey",
		"metadata": map[string]any{
			"name": name, "namespace": "tenant", "uid": fmt.Sprintf("6f1c2b3a-0000-4000-8000-%012d", i),
			"resourceVersion": "123456", "generation": 1, "creationTimestamp": "2026-11-22T04:00:00Z",
			"annotations": map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(lastApplied)},
			"finalizers":  []string{"switchboard.dev/apikey"},
			"managedFields": []any{
				map[string]any{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "switchboard.dev/v1alpha1", "time": "2026-11-22T04:00:00Z", "fieldsType": "FieldsV1",
					"fieldsV1": json.RawMessage(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},"f:spec":{".":{},"f:connectionSelector":{".":{},"f:matchLabels":{".":{},"f:team":{}}},"f:description":{}}}`)},
			},
		},
		"spec": json.RawMessage(specJSON),
		"status": map[string]any{"keyGeneration": 1, "keyHint": "sb_live_…a1b2", "createdAt": "2026-11-22T04:00:01Z", "lastUsedAt": "2026-11-22T05:00:00Z",
			"observedGeneration": 1, "conditions": []any{cond("Ready", "KeyIssued"), cond("Revealed", "Claimed")}},
	}
	raw, _ := json.Marshal(obj)
	return raw
}

// BenchmarkAPIKeyMemory measures the heap one cached APIKey costs the server: the object its
// informer stores after the cache transform, and the index's entry (its hash Secret is apart).
func BenchmarkAPIKeyMemory(b *testing.B) {
	const n = 5000
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = appliedAPIKey(i)
	}
	decode := func(i int) (any, error) {
		k := &switchboardv1alpha1.APIKey{}
		return k, json.Unmarshal(raws[i], k)
	}
	b.ReportAllocs()
	for b.Loop() {
		idx := keyindex.New()
		b.ReportMetric(cacheHeap(b, n, decode, compactAPIKey, feedAPIKeys(idx, logr.Discard())), "heapB/key")
		if len(idx.Keys()) != n {
			b.Fatalf("the index holds %d keys, want %d", len(idx.Keys()), n)
		}
	}
}

// TestCompactAPIKey: the cache keeps of an APIKey its identity and the index's Key, which
// carries what the request path enforces (revocation, expiry, selector, policy, last use) and
// nothing of the description, annotations, managed fields or conditions.
func TestCompactAPIKey(t *testing.T) {
	k := &switchboardv1alpha1.APIKey{}
	if err := json.Unmarshal(appliedAPIKey(7), k); err != nil {
		t.Fatal(err)
	}
	k.Spec.Revoked = true
	k.Spec.RateLimit = &switchboardv1alpha1.APIKeyRateLimit{Requests: 10, Period: metav1.Duration{Duration: time.Minute}}
	obj, err := compactAPIKey(k)
	if err != nil {
		t.Fatal(err)
	}
	ck, ok := obj.(*cachedAPIKey)
	if !ok {
		t.Fatalf("the cache keeps a %T", obj)
	}
	if ck.Annotations != nil || ck.ManagedFields != nil || ck.Finalizers != nil || ck.Name != "key-00007" || ck.Namespace != "tenant" || ck.UID != k.UID {
		t.Errorf("the cached metadata = %+v", ck.ObjectMeta)
	}
	if ck.err != nil || ck.entry == nil || !ck.entry.Revoked || ck.entry.SelectorKey != "team=data" || ck.entry.RateLimit == nil || ck.entry.LastUsedAt.IsZero() {
		t.Errorf("the cached Key = %+v (%v)", ck.entry, ck.err)
	}
	if again, _ := compactAPIKey(obj); again != obj {
		t.Error("the transform is not idempotent")
	}
	if key, err := toolscache.MetaNamespaceKeyFunc(obj); err != nil || key != "tenant/key-00007" {
		t.Errorf("the informer's store key = %q, %v", key, err)
	}
	bad := k.DeepCopy()
	bad.Spec.ConnectionSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Sideways"}}}
	obj, _ = compactAPIKey(bad)
	if ck := obj.(*cachedAPIKey); ck.err == nil || ck.entry.SelectorKey != "\x00nothing" {
		t.Errorf("an invalid selector: err %v, selector %q; want an error and a key that lists nothing", ck.err, ck.entry.SelectorKey)
	}
}

// BenchmarkHashSecretMemory measures the heap one cached hash Secret costs the server: the
// object its informer stores after the cache transform, and the index's entries. The Secrets
// are in a rotation's grace (two hashes), as protobuf decodes them.
func BenchmarkHashSecretMemory(b *testing.B) {
	const n = 5000
	raws := make([][]byte, n)
	for i := range raws {
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: fmt.Sprintf("key-%05d", i), UID: types.UID(fmt.Sprintf("6f1c2b3a-0000-4000-8000-%012d", i))}}
		s := fixture.HashSecret(systemNamespace, ak, fmt.Sprintf("current-%d", i), fmt.Sprintf("previous-%d", i), time.Now().Add(time.Hour))
		s.UID, s.ResourceVersion, s.CreationTimestamp = types.UID(fmt.Sprintf("0a1b2c3d-0000-4000-8000-%012d", i)), "123456", metav1.Now()
		var err error
		if raws[i], err = s.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	decode := func(i int) (any, error) {
		s := &corev1.Secret{}
		return s, s.Unmarshal(raws[i])
	}
	b.ReportAllocs()
	for b.Loop() {
		idx := keyindex.New()
		b.ReportMetric(cacheHeap(b, n, decode, compactHashSecret, feedHashSecrets(idx, logr.Discard())), "heapB/secret")
		if st := idx.Stats(); st.Hashes != 2*n {
			b.Fatalf("the index holds %d hashes, want %d", st.Hashes, 2*n)
		}
	}
}

// TestCompactHashSecret: the cache keeps of a hash Secret its identity and its hashes as the
// index reads them, and a Secret that breaks the contract keeps the reason, no hash.
func TestCompactHashSecret(t *testing.T) {
	ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "k", UID: "uid-1"}}
	s := fixture.HashSecret(systemNamespace, ak, "current", "previous", time.Now().Add(time.Hour))
	s.Annotations = map[string]string{"note": strings.Repeat("a", 1000)}
	obj, err := compactHashSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	cs, ok := obj.(*cachedHashSecret)
	if !ok {
		t.Fatalf("the cache keeps a %T", obj)
	}
	if cs.Annotations != nil || cs.Labels != nil || cs.Name != s.Name || cs.Namespace != systemNamespace {
		t.Errorf("the cached metadata = %+v", cs.ObjectMeta)
	}
	if cs.hashes == nil || cs.hashes.Err() != nil || cs.hashes.Name() != s.Name {
		t.Fatalf("the cached hashes = %+v", cs.hashes)
	}
	idx := keyindex.New()
	if err := idx.PutHashSecret(cs.hashes); err != nil || idx.Stats().Hashes != 2 {
		t.Errorf("the index took %d hashes (%v), want 2", idx.Stats().Hashes, err)
	}
	if again, _ := compactHashSecret(obj); again != obj {
		t.Error("the transform is not idempotent")
	}
	if key, err := toolscache.MetaNamespaceKeyFunc(obj); err != nil || key != systemNamespace+"/"+s.Name {
		t.Errorf("the informer's store key = %q, %v", key, err)
	}
	delete(s.Labels, keysecret.LabelAPIKeyUID)
	obj, _ = compactHashSecret(s)
	if err := obj.(*cachedHashSecret).hashes.Err(); err == nil {
		t.Error("a hash Secret without its APIKey's UID was read without an error")
	}
}

// TestFeedConnections: the feed lists a Connection once it has an id, replaces it when it
// changes, and delists it when it loses its id or is deleted, also when the informer missed the
// deletion and hands over a tombstone.
func TestFeedConnections(t *testing.T) {
	x := keyindex.New()
	feed := feedConnections(x, logr.Discard())
	set := func(c *switchboardv1alpha1.Connection) {
		t.Helper()
		obj, err := compactConnection(c)
		if err != nil {
			t.Fatal(err)
		}
		feed.OnUpdate(nil, obj)
	}
	listed := func(ns string) string {
		var ids []string
		for _, c := range x.Connections(ns).Items() {
			ids = append(ids, c.ID)
		}
		return strings.Join(ids, ",")
	}
	set(fixture.Connection("a", "c", "conn_3"))
	set(fixture.Connection("a", "a", "conn_1"))
	set(fixture.Connection("a", "b", "conn_2"))
	set(fixture.Connection("a", "noid", ""))
	set(fixture.Connection("b", "z", "conn_0"))
	if got := listed("a"); got != "conn_1,conn_2,conn_3" {
		t.Fatalf("namespace a lists %s", got)
	}
	set(fixture.Connection("a", "a", "conn_9"))
	obj, _ := compactConnection(fixture.Connection("a", "b", "conn_2"))
	feed.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "a/b", Obj: obj})
	if got := listed("a"); got != "conn_3,conn_9" {
		t.Errorf("after a change and a missed deletion: %s", got)
	}
	feed.OnDelete(&cachedConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "z"}})
	if got := listed("b"); got != "" {
		t.Errorf("after its deletion, namespace b lists %s", got)
	}
	set(fixture.Connection("a", "c", ""))
	if got := listed("a"); got != "conn_9" {
		t.Errorf("after c lost its id: %s", got)
	}
}

// systemNamespace is where the tests' hash Secrets live, as the operator would put them.
const systemNamespace = "switchboard-system"
