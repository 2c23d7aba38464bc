package permission

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// largestRules are the costliest rules the schema admits: every list at its bound, every path
// of 256 characters in 16 segments (half of them captures), every condition allowed of 512
// characters, the largest the cost bound accepts.
func largestRules(t testing.TB) []switchboardv1alpha1.PermissionRule {
	var specs []switchboardv1alpha1.PermissionRule
	for i := range switchboardv1alpha1.MaxPermissionRules {
		r := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow,
			Methods: []switchboardv1alpha1.HTTPMethod{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}}
		for j := range switchboardv1alpha1.MaxPermissionPaths {
			var segs []string
			for k := range switchboardv1alpha1.MaxPermissionPathSegments {
				if k%2 == 1 && k < switchboardv1alpha1.MaxPermissionPathSegments-1 {
					segs = append(segs, fmt.Sprintf("{p%d}", k))
				} else {
					segs = append(segs, fmt.Sprintf("r%dp%ds%d", i, j, k))
				}
			}
			p := "/" + strings.Join(segs, "/")
			p += strings.Repeat("x", switchboardv1alpha1.MaxPermissionPathLength-len(p))
			r.Paths = append(r.Paths, p)
		}
		for k := range switchboardv1alpha1.MaxPermissionAudiences {
			r.Audiences = append(r.Audiences, switchboardv1alpha1.Audience(fmt.Sprintf("audience-%d-%d", i, k)+strings.Repeat("a", 40)))
		}
		for k := range switchboardv1alpha1.MaxPermissionSourceRanges {
			r.SourceRanges = append(r.SourceRanges, switchboardv1alpha1.CIDR(fmt.Sprintf("2001:db8:%x:%x::/64", i, k)))
		}
		if i < switchboardv1alpha1.MaxPermissionConditions {
			c := `request.method == "GET"`
			for len(c) < switchboardv1alpha1.MaxPermissionConditionLen-40 {
				c += fmt.Sprintf(` && request.path != "/x%d"`, len(c))
			}
			r.Condition = c
		}
		specs = append(specs, r)
	}
	if _, err := Compile(specs); err != nil {
		t.Fatalf("the largest rules do not compile: %v", err)
	}
	return specs
}

// TestLargestPermissionsAreBounded: one key's rules at every bound cost a server replica at
// most 256 KiB of heap, compiled (every replica holds every key's): as much as one Connection
// at its limits, so that the platform's ResourceQuota on APIKeys bounds what a tenant's keys
// can cost (docs/security.md, 30). Before the bounds were cut, such a key took 4.2 MiB.
func TestLargestPermissionsAreBounded(t *testing.T) {
	specs := largestRules(t)
	const keys = 20
	held := make([]*Rules, keys)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range held {
		rs, err := Compile(specs)
		if err != nil {
			t.Fatal(err)
		}
		held[i] = rs
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perKey := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / keys
	t.Logf("the largest rules of one key: %d KiB of heap, compiled", perKey/1024)
	if perKey > 256<<10 {
		t.Errorf("the largest rules of one key take %d KiB of heap compiled, more than 256 KiB", perKey/1024)
	}
	runtime.KeepAlive(held)
}
