// Package cluster is the release's end-to-end suite on a real one-node Kubernetes cluster
// (internal/local/cluster): the release cut into a registry in the cluster's network namespace,
// `helm install` of its chart from there with the image pulled by digest, the client flow
// through the Service, leader failover, `helm uninstall`, the kustomize install, the plugin
// installed by name with krew, and the upgrade from the previous release under load. Its tests carry the `cluster` build tag and need root; `make
// test-cluster` (part of `make test`) builds what they need and runs them.
package cluster
