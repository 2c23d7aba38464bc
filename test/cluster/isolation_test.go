//go:build cluster

package cluster

import (
	"context"
	"testing"
	"time"
)

// TestNoWayOut dials addresses outside the cluster from inside its network namespace, where
// every client of the suite runs: the connections must fail there, while from the host the
// same addresses may well answer (this machine's egress proxy answers anything).
func TestNoWayOut(t *testing.T) {
	targets := []string{"1.1.1.1:80", "10.255.255.53:53", "192.168.0.1:443"}
	for _, addr := range targets {
		t.Run(addr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			conn, err := s.c.DialContext(ctx, "tcp", addr)
			if err == nil {
				_ = conn.Close()
				t.Fatalf("a connection to %s left the cluster's network namespace", addr)
			}
			t.Logf("%s from inside the namespace: %v", addr, err)
		})
	}
}
