package servingcert

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
)

// TestConfigMapBundleNotBroughtBack: the bundle ConfigMap is created at the first publication
// when missing, and never again: a replica still running after `helm uninstall` deleted it
// leaves it deleted. (A pure unit test of that decision; the publication against a real API
// server is in internal/operator/reveal's tests.)
func TestConfigMapBundleNotBroughtBack(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	key := client.ObjectKey{Namespace: "sb", Name: "switchboard-reveal-ca"}
	target := ConfigMapBundle(c, key)
	now := time.Now()
	_, cert, err := selfSigned([]string{"127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Publish(ctx, cert, now); err != nil {
		t.Fatalf("first publication: %v", err)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, key, &cm); err != nil || cm.Data[reveal.BundleKey] == "" {
		t.Fatalf("the first publication made no bundle: %v", err)
	}
	if err := c.Delete(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	if err := target.Publish(ctx, cert, now.Add(time.Minute)); err != nil {
		t.Fatalf("publishing after the deletion: %v", err)
	}
	if err := c.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the deleted bundle was brought back (%v)", err)
	}
}
