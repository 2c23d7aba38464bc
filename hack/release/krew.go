package main

import (
	"strings"

	"sigs.k8s.io/yaml"
)

// The krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2 Plugin), the fields
// krew's index needs.
type (
	krewPlugin struct {
		APIVersion string       `json:"apiVersion"`
		Kind       string       `json:"kind"`
		Metadata   krewMetadata `json:"metadata"`
		Spec       krewSpec     `json:"spec"`
	}
	krewMetadata struct {
		Name string `json:"name"`
	}
	krewSpec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Platforms        []krewPlatform `json:"platforms"`
	}
	krewPlatform struct {
		Selector krewSelector `json:"selector"`
		URI      string       `json:"uri"`
		SHA256   string       `json:"sha256"`
		Bin      string       `json:"bin"`
		Files    []krewFile   `json:"files"`
	}
	krewSelector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	krewFile struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
)

// pluginArchive is one plugin archive of the release, for the krew manifest.
type pluginArchive struct {
	goos, goarch, file, sha256 string
}

// krewManifest is the plugin's krew manifest: one platform per archive, each downloaded from
// baseURL/<archive>.
func krewManifest(version, baseURL string, archives []pluginArchive) ([]byte, error) {
	p := krewPlugin{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin",
		Metadata: krewMetadata{Name: "switchboard"},
		Spec: krewSpec{Version: version, Homepage: "https://github.com/switchboard-dev/switchboard",
			ShortDescription: "Create, list, rotate and revoke switchboard's API keys",
			Description: "The kubectl plugin of switchboard, the Kubernetes-native API-key service: it creates, " +
				"lists, rotates and revokes API keys with your own Kubernetes identity.",
		}}
	for _, a := range archives {
		bin := "kubectl-switchboard"
		if a.goos == "windows" {
			bin += ".exe"
		}
		p.Spec.Platforms = append(p.Spec.Platforms, krewPlatform{
			Selector: krewSelector{MatchLabels: map[string]string{"os": a.goos, "arch": a.goarch}},
			URI:      strings.TrimSuffix(baseURL, "/") + "/" + a.file, SHA256: a.sha256, Bin: bin,
			Files: []krewFile{{From: bin, To: "."}, {From: "LICENSE", To: "."}},
		})
	}
	return yaml.Marshal(p)
}
