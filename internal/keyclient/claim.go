package keyclient

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

var (
	// ErrNotPublished means the operator has not published a reveal Secret for the key (yet):
	// it is still issuing it, the key is delivered to spec.secretName, or the reveal was
	// claimed or expired and the status already says so.
	ErrNotPublished = errors.New("the key has no reveal Secret to claim")
	// ErrAlreadyClaimed means somebody else claimed the reveal Secret first, or it expired.
	ErrAlreadyClaimed = errors.New("the key was already claimed by someone else, or its reveal expired; rotate the key to get a new one")
	// ErrNotARevealSecret means the Secret named is not the reveal Secret of the APIKey (its
	// controller, by UID): planted by someone else, or left by a deleted namesake.
	ErrNotARevealSecret = errors.New("not the reveal Secret of the APIKey")
)

// Revealed is a claimed key.
type Revealed struct {
	// Key is the plaintext key. Show it once; never log it.
	Key string
	// Hint identifies the key without revealing it.
	Hint string
	// Generation is the key generation (status.keyGeneration) the key belongs to.
	Generation int64
}

// Claim claims the reveal Secret that apiKey's status publishes: it reads the key and deletes
// the Secret with UID and resourceVersion preconditions, so that exactly one claimer ever gets
// it. apiKey must be fresh enough to name it: pass the object as last read.
func Claim(ctx context.Context, c client.Client, apiKey *switchboardv1alpha1.APIKey) (Revealed, error) {
	name := apiKey.Status.RevealSecretName
	if name == "" {
		return Revealed{}, ErrNotPublished
	}
	var secret corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: apiKey.Namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return Revealed{}, ErrAlreadyClaimed
		}
		return Revealed{}, apiError(err, Secrets.verb("get"), apiKey.Namespace, name)
	}
	if err := belongsTo(&secret, apiKey); err != nil {
		return Revealed{}, err
	}
	key, err := keysecret.Plaintext(&secret, "")
	if err != nil {
		return Revealed{}, err
	}
	uid, rv := secret.UID, secret.ResourceVersion
	err = c.Delete(ctx, &secret, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return Revealed{}, ErrAlreadyClaimed
	default:
		return Revealed{}, apiError(err, Secrets.verb("delete"), apiKey.Namespace, name)
	}
	return Revealed{Key: key, Hint: keysecret.Hint(&secret), Generation: keysecret.Generation(&secret)}, nil
}

// belongsTo refuses a Secret that is not the reveal Secret of this very APIKey object (its
// controller, by UID): a Secret of the same name planted by someone else, or one left by a
// deleted namesake.
func belongsTo(secret *corev1.Secret, apiKey *switchboardv1alpha1.APIKey) error {
	if !keysecret.IsOwnedBy(secret, apiKey, keysecret.ComponentReveal) {
		return fmt.Errorf("secret %s/%s: %w %s", secret.Namespace, secret.Name, ErrNotARevealSecret, apiKey.Name)
	}
	return nil
}

// Claimer claims a key's one-time reveal for a Client. The default reads and deletes the
// reveal Secret with the Client's own identity (Claim); the panel in impersonate mode asks the
// operator to, so that it needs no right on Secrets (internal/operator/reveal).
type Claimer interface {
	Claim(ctx context.Context, apiKey *switchboardv1alpha1.APIKey) (Revealed, error)
}

// Claim claims apiKey's published reveal, with this Client's identity unless Options.Claimer
// says otherwise.
func (k *Client) Claim(ctx context.Context, apiKey *switchboardv1alpha1.APIKey) (Revealed, error) {
	if k.claimer != nil {
		if apiKey.Status.RevealSecretName == "" {
			return Revealed{}, ErrNotPublished
		}
		return k.claimer.Claim(ctx, apiKey)
	}
	return Claim(ctx, k.c, apiKey)
}
