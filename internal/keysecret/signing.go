package keysecret

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The copy of a KeyWebhook's signing secrets in the signing namespace: the operator's KeyWebhook
// controller writes it, the webhook sender reads it (docs/webhooks.md), so its format is here,
// below both.
const (
	// ComponentSigning is the LabelComponent of a copy.
	ComponentSigning = "webhook-signing"
	// LabelWebhookNamespace, LabelWebhookName and LabelWebhookUID name the KeyWebhook a copy is
	// of, so that a copy whose KeyWebhook is gone is found and deleted.
	LabelWebhookNamespace = "switchboard.dev/keywebhook-namespace"
	LabelWebhookName      = "switchboard.dev/keywebhook-name"
	LabelWebhookUID       = "switchboard.dev/keywebhook-uid"
	// DataSigningSecrets is a copy's data entry: the "whsec_" secrets, space-separated.
	DataSigningSecrets = "secrets"
	// TypeSigning is a copy's type, so that nothing mistakes it for a tenant's Secret.
	TypeSigning corev1.SecretType = "switchboard.dev/webhook-signing"
)

// SigningSecretName is the name, in the signing namespace, of the copy of the signing secrets
// of the KeyWebhook with UID uid.
func SigningSecretName(uid types.UID) string { return "webhook-signing-" + string(uid) }

// signingLabels are the labels the copies carry, in the order the caches keep them.
var signingLabels = []string{LabelWebhookNamespace, LabelWebhookName, LabelWebhookUID}

// IsSigningLabel says whether a label is one of a copy's, for caches that trim labels.
func IsSigningLabel(l string) bool { return slices.Contains(signingLabels, l) }
