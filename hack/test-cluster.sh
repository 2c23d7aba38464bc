#!/usr/bin/env bash
# The cluster suite: test/cluster on a one-node cluster that internal/local/cluster builds from parts
# (needs root). `make test-cluster` builds its binaries and images first.
set -euo pipefail
cd "$(dirname "$0")/.."

assets=${KUBEBUILDER_ASSETS:-bin/k8s/$(cat hack/kube-version)}
for f in bin/image/switchboard.tar bin/image/pause.tar bin/kubectl-switchboard "${HELM:-bin/helm-v3.22.0}" \
	"$assets"/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy,kubectl}; do
	if [[ ! -e "$f" ]]; then
		echo "test-cluster: $f is missing: run \`make test-cluster\` (it builds everything first)" >&2
		exit 1
	fi
done

start=$(date +%s)
go test -tags cluster -count=1 -timeout 20m -v ./test/cluster/... "$@"
echo "test-cluster: passed in $(( $(date +%s) - start ))s"
