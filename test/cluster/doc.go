// Package cluster is the chart's end-to-end suite on a real one-node Kubernetes cluster
// (internal/local/cluster): `helm install` with the image `make image` builds, the client flow
// through the Service, leader failover, a rolling upgrade under load, `helm uninstall`, and
// the kustomize install. Its tests carry the `cluster` build tag and need root; `make
// test-cluster` (part of `make test`) builds what they need and runs them.
package cluster
