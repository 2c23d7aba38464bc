package keysecret

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// NewReveal returns the one-time reveal Secret of key generation gen of key, holding plaintext.
// It is immutable: claiming it deletes it, and nothing ever changes the key it holds.
func NewReveal(key *switchboardv1alpha1.APIKey, gen int64, plaintext string) *corev1.Secret {
	immutable := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       key.Namespace,
			Name:            RevealName(key.Name, gen),
			Labels:          labelsFor(key, ComponentReveal, gen),
			OwnerReferences: []metav1.OwnerReference{controllerRef(key)},
		},
		Type:      TypeReveal,
		Immutable: &immutable,
		Data:      data(plaintext),
	}
}

// NewDelivery returns the delivery Secret spec.secretName of key, holding plaintext as key
// generation gen.
func NewDelivery(key *switchboardv1alpha1.APIKey, gen int64, plaintext string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: key.Namespace,
		Name:      key.Spec.SecretName,
	}}
	SetDelivered(s, key, gen, plaintext)
	return s
}

// SetDelivered makes s, a delivery Secret of key, hold plaintext as key generation gen. Labels
// and data keys other than switchboard's are dropped: the Secret is switchboard's to write.
func SetDelivered(s *corev1.Secret, key *switchboardv1alpha1.APIKey, gen int64, plaintext string) {
	SetTemplate(s, key, gen)
	s.OwnerReferences = []metav1.OwnerReference{controllerRef(key)}
	s.Type = TypeDelivery
	s.Data = data(plaintext)
	s.StringData = nil
}

func data(plaintext string) map[string][]byte {
	return map[string][]byte{DataKey: []byte(plaintext), DataHint: []byte(apikey.Hint(plaintext))}
}

// Plaintext returns the key that a reveal or delivery Secret holds, once it is a well-formed
// key: with prefix, or with any valid prefix when prefix is "". Errors never contain the key.
func Plaintext(s *corev1.Secret, prefix string) (string, error) {
	plaintext := string(s.Data[DataKey])
	if plaintext == "" {
		return "", fmt.Errorf("secret %s/%s holds no key", s.Namespace, s.Name)
	}
	if prefix == "" {
		prefix, _, _ = strings.Cut(plaintext, apikey.LiveMarker)
		if err := apikey.ValidatePrefix(prefix); err != nil {
			return "", fmt.Errorf("secret %s/%s holds no well-formed key: %w", s.Namespace, s.Name, apikey.ErrMalformed)
		}
	}
	if err := apikey.Parse(plaintext, prefix); err != nil {
		return "", fmt.Errorf("secret %s/%s holds no well-formed key: %w", s.Namespace, s.Name, err)
	}
	return plaintext, nil
}

// Hint returns the hint a reveal or delivery Secret stores beside its key.
func Hint(s *corev1.Secret) string { return string(s.Data[DataHint]) }

// IsOwnedBy reports whether s is a reveal or delivery Secret (component) of key: the APIKey
// with key's UID is its controller, and its type and component label are the component's.
// Only such a Secret may switchboard delete or overwrite; a name, a label or a status field
// that points at a Secret proves nothing, since tenants write all three.
func IsOwnedBy(s *corev1.Secret, key *switchboardv1alpha1.APIKey, component string) bool {
	var want corev1.SecretType
	switch component {
	case ComponentReveal:
		want = TypeReveal
	case ComponentDelivery:
		want = TypeDelivery
	default:
		return false
	}
	owner := metav1.GetControllerOfNoCopy(s)
	return owner != nil && owner.UID == key.UID && owner.Kind == "APIKey" &&
		owner.APIVersion == switchboardv1alpha1.GroupVersion.String() &&
		s.Type == want && s.Labels[LabelComponent] == component
}

// SetTemplate gives delivery Secret s of key generation gen the labels and annotations of
// key's spec.secretTemplate; switchboard's own labels win over the template's.
func SetTemplate(s *corev1.Secret, key *switchboardv1alpha1.APIKey, gen int64) {
	s.Labels, s.Annotations = templated(key, gen)
}

// TemplateApplied says whether delivery Secret s was given key's spec.secretTemplate as it is
// now, by the digest SetTemplate labels it with (the operator's cache keeps no other label).
func TemplateApplied(s *corev1.Secret, key *switchboardv1alpha1.APIKey) bool {
	return s.Labels[LabelTemplate] == templateDigest(key.Spec.SecretTemplate)
}

// templateDigest names a template's content; "" for none.
func templateDigest(t *switchboardv1alpha1.APIKeySecretTemplate) string {
	if t == nil || len(t.Labels) == 0 && len(t.Annotations) == 0 {
		return ""
	}
	raw, _ := json.Marshal(t) // maps marshal with sorted keys: one digest per content
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

func templated(key *switchboardv1alpha1.APIKey, gen int64) (labels, annotations map[string]string) {
	labels = map[string]string{}
	if t := key.Spec.SecretTemplate; t != nil {
		maps.Copy(labels, t.Labels)
		if len(t.Annotations) > 0 {
			annotations = maps.Clone(t.Annotations)
		}
	}
	maps.Copy(labels, labelsFor(key, ComponentDelivery, gen))
	if d := templateDigest(key.Spec.SecretTemplate); d != "" {
		labels[LabelTemplate] = d
	}
	return labels, annotations
}
