package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
			Metadata: map[string]string{"region": "eu-west-1"},
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
