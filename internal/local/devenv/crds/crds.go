// Package crds embeds switchboard's CustomResourceDefinitions, copied from config/crd/bases by
// `make manifests`, so that `switchboard dev` can install them with no files beside the binary.
package crds

import "embed"

// Bases holds the CRD manifests under "bases/".
//
//go:embed bases/*.yaml
var Bases embed.FS
