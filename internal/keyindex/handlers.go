package keyindex

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// HashSecretHandler keeps the index in step with the informer of hash Secrets.
func (x *Index) HashSecretHandler(log logr.Logger) toolscache.ResourceEventHandler {
	set := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok {
			if err := x.SetHashSecret(s); err != nil {
				log.Error(err, "ignoring a hash Secret that does not follow the contract", "secret", s.Name)
			}
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if s, ok := tombstone(obj).(*corev1.Secret); ok {
				x.DeleteHashSecret(s.Name)
			}
		},
	}
}

// APIKeyHandler keeps the index in step with the informer of APIKeys.
func (x *Index) APIKeyHandler(log logr.Logger) toolscache.ResourceEventHandler {
	set := func(obj any) {
		if k, ok := obj.(*switchboardv1alpha1.APIKey); ok {
			if err := x.SetAPIKey(k); err != nil {
				log.Error(err, "APIKey has an invalid connectionSelector; it lists nothing", "namespace", k.Namespace, "name", k.Name)
			}
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if k, ok := tombstone(obj).(*switchboardv1alpha1.APIKey); ok {
				x.DeleteAPIKey(k.UID)
			}
		},
	}
}

// ConnectionHandler keeps the index in step with the informer of Connections.
func (x *Index) ConnectionHandler(log logr.Logger) toolscache.ResourceEventHandler {
	set := func(obj any) {
		if c, ok := obj.(*switchboardv1alpha1.Connection); ok {
			if err := x.SetConnection(c); err != nil {
				log.Error(err, "Connection cannot be listed", "namespace", c.Namespace, "name", c.Name)
			}
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if c, ok := tombstone(obj).(*switchboardv1alpha1.Connection); ok {
				x.DeleteConnection(c.Namespace, c.Name)
			}
		},
	}
}

// tombstone unwraps the final state of an object whose deletion the informer missed.
func tombstone(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
