// Package scheme holds the one runtime.Scheme that switchboard's clients, caches and managers
// use: the core Kubernetes types and switchboard's own.
package scheme

import (
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Scheme knows the core Kubernetes types and switchboard's. It is built once and only read
// afterwards (a Scheme is safe for concurrent reads): nothing may add types to it.
var Scheme = func() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(switchboardv1alpha1.AddToScheme(s))
	return s
}()
