//go:build tools

// Package tools pins cosign's module, whose cmd/cosign the Makefile builds: `make release` signs
// the image index, the chart and checksums.txt with it, and hack/release's tests verify them.
package tools

import _ "github.com/sigstore/cosign/v2/cmd/cosign"
