//go:build !unit

package chart

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHelmImageReference: with image.digest set, every switchboard container runs
// repository@digest, the tag dropped, so that the nodes pull the image that was signed and not
// whatever a tag points to later; without it, repository:tag as before.
func TestHelmImageReference(t *testing.T) {
	const (
		repo   = "registry.example.com/switchboard"
		digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	)
	tests := []struct {
		name string
		sets []string
		want string
	}{
		{name: "defaults", want: "ghcr.io/switchboard-dev/switchboard:0.1.0"},
		{name: "tag", sets: []string{"image.repository=" + repo, "image.tag=v0.2.0"}, want: repo + ":v0.2.0"},
		{name: "digest", sets: []string{"image.repository=" + repo, "image.digest=" + digest}, want: repo + "@" + digest},
		{name: "digest and tag", sets: []string{"image.repository=" + repo, "image.tag=v0.2.0", "image.digest=" + digest}, want: repo + "@" + digest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := 0
			for _, o := range render(t, tt.sets) {
				for _, field := range []string{"containers", "initContainers"} {
					containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
					for _, c := range containers {
						image, _, _ := unstructured.NestedString(c.(map[string]any), "image")
						seen++
						if image != tt.want {
							t.Errorf("%s %s: image %q, want %q", o.GetKind(), o.GetName(), image, tt.want)
						}
						if strings.Contains(tt.want, "@") && !strings.HasSuffix(image, "@"+digest) {
							t.Errorf("%s %s: image %q does not end with @%s", o.GetKind(), o.GetName(), image, digest)
						}
					}
				}
			}
			if seen != 4 {
				t.Fatalf("checked %d containers, want 4 (operator, server, panel, webhooks)", seen)
			}
		})
	}
}
