// Package version carries the build's version, set by the Makefile's -ldflags, and the
// Kubernetes release switchboard's local control plane is built from.
package version

// Version is the release or git description of this build.
var Version = "dev"

// Kubernetes is the release of the control plane that `make envtest` builds into
// bin/k8s/<release>, which envtest and `switchboard dev` run. hack/kube-version is the pin the
// Makefile and scripts read; a test keeps this constant equal to it.
const Kubernetes = "1.36.3"
