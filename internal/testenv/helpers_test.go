package testenv

import "testing"

// The kernel hands a port it just freed to a later listener on port 0 now and then; among
// 2,000 draws from its ~28,000 ephemeral ports a repeat is all but certain. FreeAddr must
// never repeat one, or two listeners of one process collide (a fault test saw a server's
// metrics and forward-auth ports handed the same port).
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("FreeAddr handed out %s twice", addr)
		}
		seen[addr] = true
	}
}
