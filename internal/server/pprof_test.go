//go:build !unit

package server

import (
	"io"
	"net/http"
	"testing"

	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestPprof: --pprof serves the profiles on the metrics address, and nothing serves them
// without it.
func TestPprof(t *testing.T) {
	for _, on := range []bool{true, false} {
		addr := testenv.FreeAddr(t)
		startServer(t, nil, &sc{Metrics: configv1alpha1.Metrics{MetricsBindAddress: &addr, MetricsSecure: ptr.To(false)}, Pprof: on}, Deps{}, true)
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		var status int
		eventually(t, "the metrics server", func() bool {
			resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
			if err != nil {
				return false
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			status = resp.StatusCode
			return true
		})
		if status != want {
			t.Errorf("pprof %v: /debug/pprof/heap answered %d, want %d", on, status, want)
		}
	}
}
