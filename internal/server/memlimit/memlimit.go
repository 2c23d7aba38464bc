// Package memlimit gives the server's Go runtime its container's memory limit (the server's
// command applies it), so that the garbage collector works harder as the process nears it
// instead of letting garbage grow until the kernel kills the process. The chart passes the
// limit in EnvVar (a resourceFieldRef to limits.memory); GOMEMLIMIT, when set, wins.
package memlimit

import (
	"fmt"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/api/resource"
)

// EnvVar holds the container's memory limit in bytes (or as a Kubernetes quantity).
const EnvVar = "SWITCHBOARD_MEMORY_LIMIT"

// Share is the part of the container's limit given to the Go runtime: the rest is for what the
// runtime does not count (the binary's text, kernel buffers charged to the container) and for
// the collector to act before the kernel does.
const Share = 0.9

// Limit returns the soft memory limit to set from the values of GOMEMLIMIT and EnvVar: 0 when
// GOMEMLIMIT is set (the runtime read it already) or EnvVar is empty.
func Limit(gomemlimit, container string) (int64, error) {
	if gomemlimit != "" || container == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(container)
	if err != nil {
		return 0, fmt.Errorf("$%s=%q is not a memory size: %w", EnvVar, container, err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return 0, fmt.Errorf("$%s=%q is not a positive number of bytes", EnvVar, container)
	}
	return int64(float64(n) * Share), nil
}

// Apply sets the runtime's soft memory limit from the environment (see Limit) and returns it,
// 0 when it set none.
func Apply(getenv func(string) string) (int64, error) {
	limit, err := Limit(getenv("GOMEMLIMIT"), getenv(EnvVar))
	if err != nil || limit == 0 {
		return 0, err
	}
	debug.SetMemoryLimit(limit)
	return limit, nil
}
