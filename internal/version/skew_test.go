package version

import "testing"

// The skew rule: known only between semantic versions; more than one minor apart, or another
// major, exceeds it.
func TestSkew(t *testing.T) {
	tests := []struct {
		name, client, server string
		known, exceeds       bool
	}{
		{"same", "v0.3.0", "v0.3.0", true, false},
		{"client one minor ahead", "v0.4.2", "v0.3.0", true, false},
		{"client one minor behind", "v0.2.9", "v0.3.0", true, false},
		{"client two minors ahead", "v0.5.0", "v0.3.0", true, true},
		{"client two minors behind", "v0.1.0", "v0.3.1", true, true},
		{"patch only", "v1.2.0", "v1.2.7", true, false},
		{"other major, same minor", "v2.3.0", "v1.3.0", true, true},
		{"git describe past a tag", "v0.3.0-4-gabcdef0-dirty", "v0.4.0", true, false},
		{"no leading v", "0.3.0", "v0.5.0", true, true},
		{"pre-release", "v0.6.0-rc.1", "v0.4.0", true, true},
		{"dev client", "dev", "v0.3.0", false, false},
		{"dev server", "v0.3.0", "dev", false, false},
		{"bare commit", "abc1234", "v0.3.0", false, false},
		{"empty", "", "v0.3.0", false, false},
		{"major.minor only", "v0.3", "v0.3.0", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Skew(tt.client, tt.server)
			if got.Known != tt.known || got.Exceeds != tt.exceeds {
				t.Fatalf("Skew(%q, %q) = %+v, want known %v, exceeds %v", tt.client, tt.server, got, tt.known, tt.exceeds)
			}
			if (got.Message != "") != (tt.exceeds || !tt.known) {
				t.Errorf("Skew(%q, %q) says %q", tt.client, tt.server, got.Message)
			}
		})
	}
}

// Info survives the ConfigMap: FromData reads what Data writes, and no version is no Info.
func TestInfoData(t *testing.T) {
	i := Info{Version: "v0.3.0", Commit: "abc", GoVersion: "go1.26.0", Platform: "linux/amd64"}
	if got, ok := FromData(i.Data()); !ok || got != i {
		t.Fatalf("FromData(Data()) = %+v, %v; want %+v", got, ok, i)
	}
	if _, ok := FromData(map[string]string{KeyCommit: "abc"}); ok {
		t.Fatal("FromData found a version in data without one")
	}
}
