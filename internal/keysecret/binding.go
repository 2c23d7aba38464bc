package keysecret

import (
	"encoding/json"
	"fmt"
	"slices"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// DataBinding holds, in a hash Secret, the binding the API server enforces for the key
// (spec.binding as the operator resolved it: the consumers' ServiceAccounts found, the lists
// bounded), as JSON (Binding). The operator alone writes it; absent, the key is a bearer key.
// One that does not parse fails the whole hash Secret (ParseHash): a binding is never
// half-understood, and a key never loses its binding by a record the server cannot read.
const DataBinding = "binding"

// MaxBoundServiceAccounts bounds a binding record's ServiceAccounts: those spec.binding names
// and those of the consumers found, together.
const MaxBoundServiceAccounts = 64

// Binding is a key's binding as recorded for the API server.
type Binding struct {
	// Mode is spec.binding.mode: ReportOnly or Enforce.
	Mode switchboardv1alpha1.BindingMode `json:"mode"`
	// ServiceAccounts are the names of the ServiceAccounts of the key's namespace whose pods may
	// present the key, sorted.
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
	// SPIFFEIDs are the peer principals a mesh may authenticate as the presenter, sorted.
	SPIFFEIDs []string `json:"spiffeIDs,omitempty"`
	// PublicKeys are the JWK thumbprints whose DPoP-shaped proofs may present the key, sorted.
	PublicKeys []string `json:"publicKeys,omitempty"`
}

// Encode is b as DataBinding holds it: the same binding always encodes the same, so that the
// operator writes only a change.
func (b Binding) Encode() []byte {
	for _, l := range [][]string{b.ServiceAccounts, b.SPIFFEIDs, b.PublicKeys} {
		slices.Sort(l)
	}
	out, _ := json.Marshal(b) // strings and lists of them: never fails
	return out
}

// ParseBinding reads DataBinding strictly: an unknown mode, a list past its bound, or anything
// but the JSON of a Binding is an error.
func ParseBinding(raw []byte) (*Binding, error) {
	var b Binding
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("%s: %w", DataBinding, err)
	}
	switch {
	case b.Mode != switchboardv1alpha1.BindingReportOnly && b.Mode != switchboardv1alpha1.BindingEnforce:
		return nil, fmt.Errorf("%s: mode %q is neither %s nor %s", DataBinding, b.Mode, switchboardv1alpha1.BindingReportOnly, switchboardv1alpha1.BindingEnforce)
	case len(b.ServiceAccounts) > MaxBoundServiceAccounts:
		return nil, fmt.Errorf("%s: %d ServiceAccounts, at most %d", DataBinding, len(b.ServiceAccounts), MaxBoundServiceAccounts)
	case len(b.SPIFFEIDs) > switchboardv1alpha1.MaxBindingSPIFFEIDs:
		return nil, fmt.Errorf("%s: %d SPIFFE IDs, at most %d", DataBinding, len(b.SPIFFEIDs), switchboardv1alpha1.MaxBindingSPIFFEIDs)
	case len(b.PublicKeys) > switchboardv1alpha1.MaxBindingPublicKeys:
		return nil, fmt.Errorf("%s: %d public keys, at most %d", DataBinding, len(b.PublicKeys), switchboardv1alpha1.MaxBindingPublicKeys)
	}
	return &b, nil
}
