package keyindex

import (
	"strings"
	"testing"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestPresentersAreBounded: a principal past the CRD's length (a gateway's peer principal, a
// ServiceAccount of a 253-character name in a 63-character namespace) is kept and written cut to it, so the status patch
// that carries it (and lastUsedAt) is never refused for it; presenters past the bound replace
// the least recent.
func TestPresentersAreBounded(t *testing.T) {
	var b BindingUse
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	long := "spiffe://cluster.local/" + strings.Repeat("x", 10_000)
	b.Record(&Presenter{Kind: PrincipalPeer, A: long}, now)
	b.Record(&Presenter{Kind: PrincipalServiceAccount, A: "shop", B: strings.Repeat("s", 253), Bound: true}, now)
	for i := range 20 {
		b.Record(&Presenter{Kind: PrincipalPublicKey, A: strings.Repeat("k", 43) + string(rune('a'+i))}, now.Add(time.Duration(i+1)*time.Second))
	}
	snap := b.Snapshot()
	if len(snap.Presenters) != switchboardv1alpha1.MaxBindingPresenters || snap.Misuses != 21 {
		t.Fatalf("%d presenters, %d misuses; want %d and 21", len(snap.Presenters), snap.Misuses, switchboardv1alpha1.MaxBindingPresenters)
	}
	for _, p := range []Presenter{{Kind: PrincipalPeer, A: long}, {Kind: PrincipalServiceAccount, A: strings.Repeat("n", 63), B: strings.Repeat("s", 253)}} {
		if got := p.Principal(); len(got) != switchboardv1alpha1.MaxBindingPrincipalLength {
			t.Errorf("a principal of %d characters is written as %d, want %d", len(p.A)+len(p.B), len(got), switchboardv1alpha1.MaxBindingPrincipalLength)
		}
	}
	var kept BindingUse
	kept.Record(&Presenter{Kind: PrincipalPeer, A: long}, now)
	if a := kept.Snapshot().Presenters[0].A; len(a) != switchboardv1alpha1.MaxBindingPrincipalLength {
		t.Errorf("a peer principal of %d characters is kept as %d, want %d", len(long), len(a), switchboardv1alpha1.MaxBindingPrincipalLength)
	}
}
