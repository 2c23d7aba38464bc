//go:build tools

// Package tools pins krew's module, whose cmd/validate-krew-manifest and cmd/krew the Makefile
// builds: the first checks the release's krew manifest, the second installs the plugin from a
// local krew index in the cluster suite.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
