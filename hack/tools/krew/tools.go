//go:build tools

// Package tools pins krew's module, whose cmd/validate-krew-manifest the Makefile builds.
package tools

import _ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
