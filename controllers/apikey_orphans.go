package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Hash Secrets whose APIKey is gone. The finalizer makes the operator delete an APIKey's hash
// Secret before the APIKey goes, but whoever may patch an APIKey (a tenant with `edit`) may
// also remove that finalizer and delete it at once: its hash Secret would stay, cached by the
// operator and by every server replica, outside any quota of the tenant's namespace.

// HashOwnerIndex indexes the operator's cached hash Secrets by the "<namespace>/<name>" of the
// APIKey their labels name.
const HashOwnerIndex = "switchboard.dev/hash-owner"

// hashOwner is the HashOwnerIndex value of a hash Secret of the system namespace.
func hashOwner(systemNamespace string) client.IndexerFunc {
	return func(o client.Object) []string {
		l := o.GetLabels()
		if o.GetNamespace() != systemNamespace || l[keysecret.LabelComponent] != keysecret.ComponentHash ||
			l[keysecret.LabelAPIKeyNamespace] == "" || l[keysecret.LabelAPIKeyName] == "" {
			return nil
		}
		return []string{l[keysecret.LabelAPIKeyNamespace] + "/" + l[keysecret.LabelAPIKeyName]}
	}
}

// deleteOrphanHashes deletes the hash Secrets labelled for the APIKey req whose UID is not
// live, the UID of the APIKey of that name ("" when there is none). An orphan is deleted only
// after the API server confirms that no APIKey of its UID exists under that name.
func (r *APIKeyReconciler) deleteOrphanHashes(ctx context.Context, req types.NamespacedName, live types.UID) error {
	var list corev1.SecretList
	var selector client.ListOption = client.MatchingFields{HashOwnerIndex: req.Namespace + "/" + req.Name}
	if !r.hashOwnerIndexed {
		// A reconciler driven by hand, over a client without the cache's index.
		selector = client.MatchingLabels{keysecret.LabelComponent: keysecret.ComponentHash,
			keysecret.LabelAPIKeyNamespace: req.Namespace, keysecret.LabelAPIKeyName: req.Name}
	}
	if err := r.Client.List(ctx, &list, client.InNamespace(r.SystemNamespace), selector); err != nil {
		return fmt.Errorf("listing the hash Secrets of APIKey %s: %w", req, err)
	}
	var source *switchboardv1alpha1.APIKey
	for i := range list.Items {
		hash := &list.Items[i]
		uid := types.UID(hash.Labels[keysecret.LabelAPIKeyUID])
		if uid == live && live != "" {
			continue
		}
		if source == nil {
			source = &switchboardv1alpha1.APIKey{}
			if err := r.APIReader.Get(ctx, req, source); apierrors.IsNotFound(err) {
				source.UID = ""
			} else if err != nil {
				return fmt.Errorf("reading APIKey %s: %w", req, err)
			}
		}
		if uid != "" && uid == source.UID {
			// The cache is behind: that APIKey is alive.
			continue
		}
		hashUID := hash.UID
		if err := r.Client.Delete(ctx, hash, client.Preconditions{UID: &hashUID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting hash Secret %s/%s of a deleted APIKey: %w", r.SystemNamespace, hash.Name, err)
		}
		log.FromContext(ctx).Info("deleted the hash Secret of an APIKey that is gone", "hashSecret", hash.Name, "apiKeyUID", uid)
	}
	return nil
}
