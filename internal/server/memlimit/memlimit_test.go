package memlimit

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestLimit(t *testing.T) {
	tests := []struct {
		name, gomemlimit, container string
		want                        int64
		wantErr                     bool
	}{
		{name: "nothing set", want: 0},
		{name: "bytes, as resourceFieldRef writes them", container: "268435456", want: 241591910},
		{name: "a quantity", container: "256Mi", want: 241591910},
		{name: "GOMEMLIMIT wins", gomemlimit: "100MiB", container: "268435456", want: 0},
		{name: "not a size", container: "lots", wantErr: true},
		{name: "zero", container: "0", wantErr: true},
		{name: "negative", container: "-1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Limit(tt.gomemlimit, tt.container)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("Limit(%q, %q) = %d, %v; want %d, error %v", tt.gomemlimit, tt.container, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestApply(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	env := map[string]string{EnvVar: "1Gi"}
	got, err := Apply(func(k string) string { return env[k] })
	if err != nil || got != 966367641 {
		t.Fatalf("Apply = %d, %v", got, err)
	}
	if now := debug.SetMemoryLimit(-1); now != got {
		t.Errorf("the runtime's limit is %d, want %d", now, got)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	env["GOMEMLIMIT"] = "2GiB"
	if got, err := Apply(func(k string) string { return env[k] }); got != 0 || err != nil {
		t.Errorf("with GOMEMLIMIT set, Apply = %d, %v", got, err)
	}
	if now := debug.SetMemoryLimit(-1); now != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set, the limit changed to %d", now)
	}
}
