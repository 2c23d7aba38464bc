package server

// Helpers of the unit tests, in a file of its own so that `make test-unit` (the build tag unit,
// which leaves out the tests that need a control plane) builds them too.

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

var trustedLoopback = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}

var wireNow = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

// wireConnection is a Connection as a tenant writes it, with the id the operator gave it.
func wireConnection(ns, name, id string) *switchboardv1alpha1.Connection {
	return &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(wireNow), Labels: map[string]string{"n": name}},
		Spec: switchboardv1alpha1.ConnectionSpec{
			DisplayName: "D " + name, Provider: "postgres", Metadata: map[string]switchboardv1alpha1.MetadataValue{"b": "2", "a": "1"},
			CredentialsSecretRef: &corev1.LocalObjectReference{Name: "top-secret"},
		},
		Status: switchboardv1alpha1.ConnectionStatus{ID: id},
	}
}

// hashSecret is the hash Secret of ak per the contract, with an optional previous key.
func hashSecret(ak *switchboardv1alpha1.APIKey, current, previous string, validUntil time.Time) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: systemNamespace,
			Name:      "apikey-" + string(ak.UID),
			Labels: map[string]string{
				keysecret.LabelManagedBy:       keysecret.ManagedBy,
				keysecret.LabelComponent:       keysecret.ComponentHash,
				keysecret.LabelAPIKeyNamespace: ak.Namespace,
				keysecret.LabelAPIKeyName:      ak.Name,
				keysecret.LabelAPIKeyUID:       string(ak.UID),
				keysecret.LabelGeneration:      "1",
			},
		},
		Type: keysecret.TypeHash,
		Data: map[string][]byte{keysecret.DataHash: []byte(apikey.Sum(current).String())},
	}
	if previous != "" {
		s.Labels[keysecret.LabelGeneration] = "2"
		s.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum(previous).String())
		s.Data[keysecret.DataPreviousValidUntil] = []byte(validUntil.UTC().Format(time.RFC3339))
	}
	return s
}

// systemNamespace is where the tests' hash Secrets live, as the operator would put them.
const systemNamespace = "switchboard-system"
