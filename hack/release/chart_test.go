package main

import "testing"

func TestPushedDigest(t *testing.T) {
	const d = "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
	for _, tc := range []struct {
		name, out, want string
	}{
		{"helm 3's output", "Pushed: 127.0.0.1:5000/charts/switchboard:0.1.0\nDigest: " + d + "\n", d},
		{"no digest", "Pushed: 127.0.0.1:5000/charts/switchboard:0.1.0\n", ""},
		{"not a digest", "Digest: sha256:xyz\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pushedDigest(tc.out)
			if got != tc.want || (err == nil) != (tc.want != "") {
				t.Errorf("pushedDigest(%q) = %q, %v; want %q", tc.out, got, err, tc.want)
			}
		})
	}
}
