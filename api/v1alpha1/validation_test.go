//go:build !unit

package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestCreateAndReadBack proves the CRDs are served: a valid object of each kind round-trips.
func TestCreateAndReadBack(t *testing.T) {
	ns := env.Namespace(t, "roundtrip")
	conn := &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warehouse", Labels: map[string]string{"team": "data"}},
		Spec: switchboardv1alpha1.ConnectionSpec{
			ID: "conn_warehouse1", DisplayName: "Warehouse", Provider: "postgres",
			Metadata: map[string]switchboardv1alpha1.MetadataValue{"region": "eu-west-1"},
		},
	}
	if err := env.Client.Create(ctx(t), conn); err != nil {
		t.Fatalf("creating a valid Connection: %v", err)
	}
	var gotConn switchboardv1alpha1.Connection
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(conn), &gotConn); err != nil {
		t.Fatal(err)
	}
	if gotConn.Spec.ID != "conn_warehouse1" || gotConn.Spec.Metadata["region"] != "eu-west-1" {
		t.Fatalf("Connection did not round-trip: %+v", gotConn.Spec)
	}

	expires := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	key := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ci"},
		Spec: switchboardv1alpha1.APIKeySpec{
			Description: "CI pipeline", ExpiresAt: &expires,
			Rotation: &switchboardv1alpha1.APIKeyRotation{RequestedAt: "2026-11-22T00:00:00Z"},
		},
	}
	if err := env.Client.Create(ctx(t), key); err != nil {
		t.Fatalf("creating a valid APIKey: %v", err)
	}
	var gotKey switchboardv1alpha1.APIKey
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(key), &gotKey); err != nil {
		t.Fatal(err)
	}
	if !gotKey.Spec.ExpiresAt.Equal(&expires) || gotKey.Spec.Description != "CI pipeline" {
		t.Fatalf("APIKey did not round-trip: %+v", gotKey.Spec)
	}
	if gotKey.Spec.Rotation.GracePeriod.Duration != 0 || gotKey.Spec.Rotation.RequestedAt == "" {
		t.Fatalf("rotation defaults not applied: %+v", gotKey.Spec.Rotation)
	}
}

// TestInvalidObjectsAreRejected proves the schema and CEL rules refuse bad objects with a
// message a person understands.
func TestInvalidObjectsAreRejected(t *testing.T) {
	ns := env.Namespace(t, "invalid")
	tests := []struct {
		name    string
		obj     client.Object
		message string
	}{
		{
			name:    "connection id without conn_ prefix",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{ID: "warehouse"}},
			message: "spec.id",
		},
		{
			name:    "connection id with upper case",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{ID: "conn_ABC"}},
			message: `should match '^conn_[a-z0-9]+$'`,
		},
		{
			name:    "provider with spaces",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Provider: "my provider"}},
			message: "spec.provider",
		},
		{
			name:    "bad delivery secret name",
			obj:     &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{SecretName: "Not_A_Name"}},
			message: "spec.secretName",
		},
		{
			name: "empty rotation request",
			obj: &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{
				Rotation: &switchboardv1alpha1.APIKeyRotation{RequestedAt: ""}}},
			message: "spec.rotation.requestedAt",
		},
		{
			name:    "APIKey name longer than 63 characters",
			obj:     &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("k", 64)}},
			message: "an APIKey name is at most 63 characters",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obj.SetNamespace(ns)
			if tt.obj.GetName() == "" {
				tt.obj.SetName("invalid-" + string(rune('a'+i)))
			}
			err := env.Client.Create(ctx(t), tt.obj)
			if err == nil {
				t.Fatal("the API server accepted an invalid object")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("error %q does not say %q", err, tt.message)
			}
		})
	}
}

// TestBadTimeIsRejected sends raw JSON, which a typed client cannot produce.
func TestBadTimeIsRejected(t *testing.T) {
	ns := env.Namespace(t, "badtime")
	body := `{"apiVersion":"switchboard.dev/v1alpha1","kind":"APIKey","metadata":{"name":"k","namespace":"` + ns +
		`"},"spec":{"expiresAt":"next tuesday"}}`
	result := kubernetes.NewForConfigOrDie(env.Config).Discovery().RESTClient().Post().AbsPath("/apis/switchboard.dev/v1alpha1/namespaces", ns, "apikeys").
		Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(ctx(t))
	err := result.Error()
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Fatalf("want the API server to refuse a bad time, got %v", err)
	}
	if !strings.Contains(err.Error(), "expiresAt") && !strings.Contains(err.Error(), "time") {
		t.Fatalf("error %q does not name the bad field", err)
	}
}

// TestTransitionRules proves the rules that compare an object with its previous version.
func TestTransitionRules(t *testing.T) {
	ns := env.Namespace(t, "transition")

	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "revoked"},
		Spec: switchboardv1alpha1.APIKeySpec{Revoked: true}}
	if err := env.Client.Create(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	key.Spec.Revoked = false
	err := env.Client.Update(ctx(t), key)
	if err == nil || !strings.Contains(err.Error(), "a revoked key cannot be un-revoked") {
		t.Fatalf("un-revoking must be refused with a clear message, got %v", err)
	}

	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(key), key); err != nil {
		t.Fatal(err)
	}
	key.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "now"}
	err = env.Client.Update(ctx(t), key)
	if err == nil || !strings.Contains(err.Error(), "a revoked key cannot be rotated") {
		t.Fatalf("rotating a revoked key must be refused with a clear message, got %v", err)
	}

	conn := &switchboardv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned"},
		Spec: switchboardv1alpha1.ConnectionSpec{ID: "conn_pinned"}}
	if err := env.Client.Create(ctx(t), conn); err != nil {
		t.Fatal(err)
	}
	conn.Spec.ID = "conn_other"
	err = env.Client.Update(ctx(t), conn)
	if err == nil || !strings.Contains(err.Error(), "spec.id is immutable") {
		t.Fatalf("changing spec.id must be refused with a clear message, got %v", err)
	}

	unpinned := &switchboardv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unpinned"}}
	if err := env.Client.Create(ctx(t), unpinned); err != nil {
		t.Fatal(err)
	}
	unpinned.Spec.ID = "conn_late"
	err = env.Client.Update(ctx(t), unpinned)
	if err == nil || !strings.Contains(err.Error(), "spec.id can only be set when the Connection is created") {
		t.Fatalf("adding spec.id later must be refused with a clear message, got %v", err)
	}

	unpinned.Spec.ID = ""
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(unpinned), unpinned); err != nil {
		t.Fatal(err)
	}
	unpinned.Status.ID = "conn_first"
	if err := env.Client.Status().Update(ctx(t), unpinned); err != nil {
		t.Fatalf("assigning status.id: %v", err)
	}
	unpinned.Status.ID = "conn_second"
	err = env.Client.Status().Update(ctx(t), unpinned)
	if err == nil || !strings.Contains(err.Error(), "status.id is assigned once") {
		t.Fatalf("changing status.id must be refused, got %v", err)
	}
}

// TestConnectionIDIsImmutable: no patch changes or removes a pinned spec.id, including the two
// JSON patches that remove /spec (a rule on an optional field does not run when the field goes)
// and then add a spec with another id.
func TestConnectionIDIsImmutable(t *testing.T) {
	ns := env.Namespace(t, "conn-id")
	conn := &switchboardv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned"},
		Spec: switchboardv1alpha1.ConnectionSpec{ID: "conn_pinned", DisplayName: "Pinned"}}
	if err := env.Client.Create(ctx(t), conn); err != nil {
		t.Fatal(err)
	}
	const removed, changed = "spec.id can only be set when the Connection is created, and never removed", "spec.id is immutable"
	patches := []struct {
		name  string
		typ   types.PatchType
		patch string
		want  string
	}{
		{"JSON patch removing /spec", types.JSONPatchType, `[{"op":"remove","path":"/spec"}]`, removed},
		{"JSON patch removing /spec/id", types.JSONPatchType, `[{"op":"remove","path":"/spec/id"}]`, removed},
		{"JSON patch removing /spec then adding another id", types.JSONPatchType,
			`[{"op":"remove","path":"/spec"},{"op":"add","path":"/spec","value":{"id":"conn_other"}}]`, changed},
		{"JSON patch replacing /spec", types.JSONPatchType, `[{"op":"replace","path":"/spec","value":{"id":"conn_other"}}]`, changed},
		{"merge patch nulling spec", types.MergePatchType, `{"spec":null}`, removed},
		{"merge patch changing the id", types.MergePatchType, `{"spec":{"id":"conn_other"}}`, changed},
	}
	for _, p := range patches {
		t.Run(p.name, func(t *testing.T) {
			err := env.Client.Patch(ctx(t), conn.DeepCopy(), client.RawPatch(p.typ, []byte(p.patch)))
			if err == nil || !strings.Contains(err.Error(), p.want) {
				t.Fatalf("the patch must be refused with %q, got %v", p.want, err)
			}
		})
	}
	got := &switchboardv1alpha1.Connection{}
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(conn), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ID != "conn_pinned" {
		t.Fatalf("spec.id is now %q", got.Spec.ID)
	}
	// Other changes to the spec go through.
	if err := env.Client.Patch(ctx(t), got, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"displayName":"Renamed"}}`))); err != nil {
		t.Fatalf("changing the display name: %v", err)
	}
	// An unpinned Connection may lose its whole spec (nothing to protect) but never gain an id.
	unpinned := &switchboardv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unpinned"},
		Spec: switchboardv1alpha1.ConnectionSpec{DisplayName: "Unpinned"}}
	if err := env.Client.Create(ctx(t), unpinned); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx(t), unpinned.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec"}]`))); err != nil {
		t.Fatalf("removing the spec of an unpinned Connection: %v", err)
	}
	err := env.Client.Patch(ctx(t), unpinned.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/spec","value":{"id":"conn_late"}}]`)))
	if err == nil || !strings.Contains(err.Error(), removed) {
		t.Fatalf("adding an id after creation must be refused, got %v", err)
	}
}

// manyKeys returns n map entries whose keys are keyLen and values valueLen characters long.
func manyKeys(n, keyLen, valueLen int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		k := fmt.Sprintf("k%0*d", keyLen-1, i)
		m[k] = strings.Repeat("v", valueLen)
	}
	return m
}

// keysWith returns n metadata keys (k0, k1, …) that all hold value.
func keysWith(n int, value string) map[string]switchboardv1alpha1.MetadataValue {
	m := make(map[string]switchboardv1alpha1.MetadataValue, n)
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = switchboardv1alpha1.MetadataValue(value)
	}
	return m
}

// metadataOf is m as Connection metadata.
func metadataOf(m map[string]string) map[string]switchboardv1alpha1.MetadataValue {
	out := make(map[string]switchboardv1alpha1.MetadataValue, len(m))
	for k, v := range m {
		out[k] = switchboardv1alpha1.MetadataValue(v)
	}
	return out
}

// TestTenantInputIsBounded: every string, list and map a tenant writes into a Connection or
// an APIKey has a size limit, refused with a message that names it; objects at the limits are
// accepted, which also shows the CEL rules fit the API server's runtime cost budget.
func TestTenantInputIsBounded(t *testing.T) {
	ns := env.Namespace(t, "bounds")
	selector := func(mutate func(*metav1.LabelSelector)) *switchboardv1alpha1.APIKey {
		sel := &metav1.LabelSelector{}
		mutate(sel)
		return &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{ConnectionSelector: sel}}
	}
	expressions := func(n, values, valueLen int) []metav1.LabelSelectorRequirement {
		out := make([]metav1.LabelSelectorRequirement, n)
		for i := range out {
			vs := make([]string, values)
			for j := range vs {
				vs[j] = fmt.Sprintf("%0*d", valueLen, j)
			}
			out[i] = metav1.LabelSelectorRequirement{Key: fmt.Sprintf("key%d", i), Operator: metav1.LabelSelectorOpIn, Values: vs}
		}
		return out
	}
	tests := []struct {
		name    string
		obj     client.Object
		message string // "" means the object is at the limits and must be accepted
	}{
		{name: "connection metadata at the limits (50 keys of 40, values of 500)",
			obj: &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{
				DisplayName: strings.Repeat("d", 256), Provider: strings.Repeat("p", 128), Metadata: metadataOf(manyKeys(50, 40, 500)),
				CredentialsSecretRef: &corev1.LocalObjectReference{Name: strings.Repeat("s", 253)}}}},
		{name: "connection metadata of 500 HTML characters per value (served as written, not escaped)",
			obj: &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Metadata: keysWith(50, strings.Repeat("<", 500))}}},
		{name: "connection metadata with tabs, line feeds and carriage returns",
			obj: &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Metadata: keysWith(2, "line one\r\n\tline two")}}},
		{name: "connection metadata over 32 KiB of UTF-8 (50 values of 500 two-byte characters)",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Metadata: keysWith(50, strings.Repeat("é", 500))}},
			message: "metadata values must be at most 32768 bytes (32 KiB of UTF-8) in all"},
		{name: "connection metadata value with a control character",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Metadata: keysWith(1, "a\x01b")}},
			message: "metadata keys must not contain control characters, and values none but tab, line feed and carriage return"},
		{name: "connection metadata key with a control character",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Metadata: map[string]switchboardv1alpha1.MetadataValue{"a\tb": "v"}}},
			message: "metadata keys must not contain control characters, and values none but tab, line feed and carriage return"},
		{name: "connection display name with a line feed",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{DisplayName: "two\nlines"}},
			message: "displayName must not contain control characters"},
		{name: "connection metadata with 51 keys",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Metadata: metadataOf(manyKeys(51, 4, 1))}},
			message: "spec.metadata: Too many: 51: must have at most 50 items"},
		{name: "connection metadata key of 41 characters",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Metadata: metadataOf(manyKeys(1, 41, 1))}},
			message: "metadata keys must be 1 to 40 characters long"},
		{name: "connection metadata value of 501 characters",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Metadata: metadataOf(manyKeys(1, 4, 501))}},
			message: "spec.metadata.k000: Too long"},
		{name: "connection display name of 257 characters",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{DisplayName: strings.Repeat("d", 257)}},
			message: "spec.displayName: Too long"},
		{name: "connection provider of 129 characters",
			obj:     &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{Provider: strings.Repeat("p", 129)}},
			message: "spec.provider: Too long"},
		{name: "connection credentials Secret name of 254 characters",
			obj: &switchboardv1alpha1.Connection{Spec: switchboardv1alpha1.ConnectionSpec{
				CredentialsSecretRef: &corev1.LocalObjectReference{Name: strings.Repeat("s", 254)}}},
			message: "credentialsSecretRef.name must be at most 253 characters long"},
		{name: "APIKey at the limits",
			obj: &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{
				Description: strings.Repeat("d", 256), SecretName: strings.Repeat("s", 253),
				ConnectionSelector: &metav1.LabelSelector{MatchLabels: manyKeys(16, 63, 63), MatchExpressions: expressions(16, 16, 63)},
				Rotation:           &switchboardv1alpha1.APIKeyRotation{RequestedAt: strings.Repeat("r", 64), GracePeriod: metav1.Duration{Duration: time.Hour}}}}},
		{name: "APIKey description of 257 characters",
			obj:     &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{Description: strings.Repeat("d", 257)}},
			message: "spec.description: Too long"},
		{name: "APIKey delivery Secret name of 254 characters",
			obj:     &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{SecretName: strings.Repeat("s", 254)}},
			message: "spec.secretName: Too long"},
		{name: "APIKey rotation request of 65 characters",
			obj: &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{
				Rotation: &switchboardv1alpha1.APIKeyRotation{RequestedAt: strings.Repeat("r", 65)}}},
			message: "spec.rotation.requestedAt: Too long"},
		{name: "selector with 17 matchLabels",
			obj:     selector(func(s *metav1.LabelSelector) { s.MatchLabels = manyKeys(17, 4, 1) }),
			message: "connectionSelector.matchLabels may have at most 16 entries"},
		{name: "selector label value of 64 characters",
			obj:     selector(func(s *metav1.LabelSelector) { s.MatchLabels = manyKeys(1, 4, 64) }),
			message: "connectionSelector.matchLabels keys are at most 317 characters (prefix/name) and values at most 63"},
		{name: "selector with 17 matchExpressions",
			obj:     selector(func(s *metav1.LabelSelector) { s.MatchExpressions = expressions(17, 1, 1) }),
			message: "connectionSelector.matchExpressions may have at most 16 entries"},
		{name: "selector expression with 17 values",
			obj:     selector(func(s *metav1.LabelSelector) { s.MatchExpressions = expressions(1, 17, 1) }),
			message: "connectionSelector.matchExpressions keys are at most 317 characters and have at most 16 values"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obj.SetNamespace(ns)
			tt.obj.SetName(fmt.Sprintf("bounds-%d", i))
			err := env.Client.Create(ctx(t), tt.obj)
			if tt.message == "" {
				if err != nil {
					t.Fatalf("an object at the limits was refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error saying %q, got %v", tt.message, err)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("error %q does not say %q", err, tt.message)
			}
		})
	}
}

// TestStatusIsBounded: the status, which only switchboard writes, is bounded too, so that a
// principal that may write it (the API server's identity) cannot grow it without limit.
func TestStatusIsBounded(t *testing.T) {
	ns := env.Namespace(t, "status-bounds")
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k"}}
	if err := env.Client.Create(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		key.Status.Conditions = append(key.Status.Conditions, metav1.Condition{
			Type: fmt.Sprintf("C%d", i), Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now()})
	}
	key.Status.KeyHint = strings.Repeat("h", 65)
	err := env.Client.Status().Update(ctx(t), key)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.conditions: Too many: 9: must have at most 8 items") ||
		!strings.Contains(err.Error(), "status.keyHint: Too long") {
		t.Fatalf("want the status bounds enforced, got %v", err)
	}
}

// TestRevokedIsTerminal: no patch un-revokes a key. The rule sits on the APIKey, not on its
// spec, so a JSON patch that removes or replaces the whole spec is refused too; and the
// operator's record that it saw the key revoked (status.revokedAt) cannot be removed.
func TestRevokedIsTerminal(t *testing.T) {
	ns := env.Namespace(t, "terminal")
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "revoked"},
		Spec: switchboardv1alpha1.APIKeySpec{Revoked: true, Description: "gone"}}
	if err := env.Client.Create(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	patches := []struct {
		name  string
		typ   types.PatchType
		patch string
	}{
		{"JSON patch removing /spec", types.JSONPatchType, `[{"op":"remove","path":"/spec"}]`},
		{"JSON patch replacing /spec", types.JSONPatchType, `[{"op":"replace","path":"/spec","value":{"description":"back"}}]`},
		{"JSON patch removing /spec/revoked", types.JSONPatchType, `[{"op":"remove","path":"/spec/revoked"}]`},
		{"merge patch nulling spec", types.MergePatchType, `{"spec":null}`},
		{"merge patch setting revoked false", types.MergePatchType, `{"spec":{"revoked":false}}`},
	}
	for _, p := range patches {
		t.Run(p.name, func(t *testing.T) {
			err := env.Client.Patch(ctx(t), key.DeepCopy(), client.RawPatch(p.typ, []byte(p.patch)))
			if err == nil || !strings.Contains(err.Error(), "a revoked key cannot be un-revoked") {
				t.Fatalf("the patch must be refused with a clear message, got %v", err)
			}
		})
	}
	got := &switchboardv1alpha1.APIKey{}
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(key), got); err != nil {
		t.Fatal(err)
	}
	if !got.Spec.Revoked {
		t.Fatal("the key is no longer revoked")
	}

	revokedAt := metav1.NewTime(time.Now().Truncate(time.Second))
	got.Status.RevokedAt = &revokedAt
	if err := env.Client.Status().Update(ctx(t), got); err != nil {
		t.Fatalf("recording revokedAt: %v", err)
	}
	for _, patch := range []string{`{"status":{"revokedAt":null}}`, `{"status":{"revokedAt":"2000-01-01T00:00:00Z"}}`, `{"status":null}`} {
		err := env.Client.Status().Patch(ctx(t), got.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		if err == nil || !strings.Contains(err.Error(), "status.revokedAt is set once and never changed") {
			t.Fatalf("status patch %s must be refused, got %v", patch, err)
		}
	}
}
