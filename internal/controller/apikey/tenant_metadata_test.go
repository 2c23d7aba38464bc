//go:build !unit

package apikey_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// installTenantMetadataPolicy installs config/rbac/tenant_metadata_policy.yaml as shipped,
// under names of its own and bound to namespace ns alone (other tests share the API server).
func installTenantMetadataPolicy(t *testing.T, ns string) {
	t.Helper()
	policy, binding := shippedPolicy(t, "tenant_metadata_policy.yaml")
	policy.Name += "-" + ns
	binding.Name += "-" + ns
	binding.Spec.PolicyName = policy.Name
	binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}
	for _, obj := range []client.Object{policy, binding} {
		if err := env.Client.Create(testCtx(t), obj); err != nil {
			t.Fatalf("installing %s: %v", obj.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(testCtx(t), obj) })
	}
}

// bigLabels returns n labels of about 375 bytes each: a 251-character prefix, a 60-character
// name and a 63-character value, each within Kubernetes' own bounds.
func bigLabels(n int) map[string]string {
	prefix := strings.Repeat("a", 59) + "." + strings.Repeat("b", 59) + "." + strings.Repeat("c", 59) + "." + strings.Repeat("d", 59) + ".example.com"
	labels := map[string]string{}
	for i := range n {
		labels[fmt.Sprintf("%s/%s%05d", prefix, strings.Repeat("n", 55), i)] = strings.Repeat("v", 63)
	}
	return labels
}

// TestTenantLabelsAreBounded performs issue 18's label flood as a tenant with `edit`: a
// Connection with 3,000 labels (1.1 MB, each label within Kubernetes' bounds) was accepted, and
// every /v1 replica kept them (10 such Connections: 20 MiB a replica). The shipped admission
// policy refuses it, and an APIKey with 33 labels, with a message naming the bound; 32 maximal
// labels are accepted. An object that had more before the policy can still be changed without
// adding labels (and so finalized and deleted), not given more.
func TestTenantLabelsAreBounded(t *testing.T) {
	installTenantRoles(t)
	ns := env.Namespace(t, "labels")
	tenant := actAs(t, ns, "tenant", "edit", ns)
	// Written before the policy: 40 labels.
	legacy := &switchboardv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy", Labels: bigLabels(40)}}
	if err := tenant.client.Create(testCtx(t), legacy); err != nil {
		t.Fatal(err)
	}
	installTenantMetadataPolicy(t, ns)

	flood := &switchboardv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flood", Labels: bigLabels(3000)}}
	eventually(t, "the admission policy to refuse 3,000 labels", func() error {
		err := tenant.client.Create(testCtx(t), flood.DeepCopy())
		if err == nil {
			_ = env.Client.Delete(testCtx(t), flood)
			return errors.New("a Connection with 3,000 labels was created")
		}
		if !strings.Contains(err.Error(), "metadata.labels: Too many: 3000: must have at most 32 labels") {
			return fmt.Errorf("refused for another reason (the policy may not be in force yet): %w", err)
		}
		return nil
	})
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k", Labels: bigLabels(33)}}
	if err := tenant.client.Create(testCtx(t), key); err == nil || !strings.Contains(err.Error(), "metadata.labels: Too many: 33: must have at most 32 labels") {
		t.Fatalf("an APIKey with 33 labels: %v", err)
	}
	for _, obj := range []client.Object{
		&switchboardv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full", Labels: bigLabels(32)}},
		&switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full", Labels: bigLabels(32)}},
	} {
		if err := tenant.client.Create(testCtx(t), obj); err != nil {
			t.Fatalf("32 labels on %s were refused: %v", obj.GetName(), err)
		}
	}

	// The legacy object: a change that adds no label passes, one that adds a label does not.
	got := &switchboardv1alpha1.Connection{}
	if err := tenant.client.Get(testCtx(t), client.ObjectKeyFromObject(legacy), got); err != nil {
		t.Fatal(err)
	}
	got.Spec.DisplayName = "still changeable"
	delete(got.Labels, firstKey(got.Labels))
	if err := tenant.client.Update(testCtx(t), got); err != nil {
		t.Fatalf("a Connection with more labels than the bound from before the policy cannot be changed: %v", err)
	}
	got.Labels["team.example.com/more"] = "x"
	got.Labels["team.example.com/again"] = "x"
	if err := tenant.client.Update(testCtx(t), got); err == nil {
		t.Fatal("labels were added to a Connection over the bound")
	}
	if err := tenant.client.Delete(testCtx(t), got); err != nil {
		t.Fatalf("deleting it: %v", err)
	}
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}
