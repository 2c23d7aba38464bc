package main

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// SBOMMediaType is CycloneDX JSON's media type, the SBOM's artifactType in the registry.
const SBOMMediaType = "application/vnd.cyclonedx+json"

// The CycloneDX 1.5 document, only the fields this release fills: the release as the
// application it describes, and every Go module linked into any of its binaries, read from
// the build information the Go linker embeds (what `go version -m` prints).
type (
	cdxBOM struct {
		BOMFormat   string         `json:"bomFormat"`
		SpecVersion string         `json:"specVersion"`
		Version     int            `json:"version"`
		Metadata    cdxMetadata    `json:"metadata"`
		Components  []cdxComponent `json:"components"`
	}
	cdxMetadata struct {
		Timestamp string       `json:"timestamp"`
		Component cdxComponent `json:"component"`
	}
	cdxComponent struct {
		Type       string        `json:"type"`
		BOMRef     string        `json:"bom-ref,omitempty"`
		Name       string        `json:"name"`
		Version    string        `json:"version"`
		PURL       string        `json:"purl,omitempty"`
		Hashes     []cdxHash     `json:"hashes,omitempty"`
		Properties []cdxProperty `json:"properties,omitempty"`
	}
	cdxHash struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	}
	cdxProperty struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
)

// sbom is the CycloneDX JSON of the release's binaries (label "name os/arch" → file; the
// image's included): one component per binary with its SHA-256, and one per module any of them
// links, with the go.sum hash it was built with and the binaries that link it. A module
// replaced in go.mod is listed at its replacement.
func sbom(version string, created time.Time, binaries map[string]string) ([]byte, error) {
	type mod struct {
		path, version, sum string
		in                 map[string]bool
	}
	mods := map[string]*mod{}
	goVersion := ""
	var bins []cdxComponent
	for label, file := range binaries {
		sum, err := fileSHA256(file)
		if err != nil {
			return nil, err
		}
		binName, platform, _ := strings.Cut(label, " ")
		bins = append(bins, cdxComponent{Type: "application", BOMRef: "binary:" + label, Name: binName, Version: version,
			Hashes:     []cdxHash{{Alg: "SHA-256", Content: sum}},
			Properties: []cdxProperty{{Name: "platform", Value: platform}}})
		bi, err := buildinfo.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("SBOM: reading the build information of %s: %w", file, err)
		}
		goVersion = bi.GoVersion
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			key := d.Path + "@" + d.Version
			m := mods[key]
			if m == nil {
				m = &mod{path: d.Path, version: d.Version, sum: d.Sum, in: map[string]bool{}}
				mods[key] = m
			}
			m.in[label] = true
		}
	}
	bom := cdxBOM{BOMFormat: "CycloneDX", SpecVersion: "1.5", Version: 1,
		Metadata: cdxMetadata{Timestamp: created.UTC().Format(time.RFC3339), Component: cdxComponent{
			Type: "application", BOMRef: "pkg:golang/github.com/switchboard-dev/switchboard@" + version,
			Name: "switchboard", Version: version, PURL: "pkg:golang/github.com/switchboard-dev/switchboard@" + version,
			Properties: []cdxProperty{{Name: "go", Value: goVersion}},
		}},
		Components: []cdxComponent{},
	}
	for _, m := range mods {
		purl := "pkg:golang/" + m.path + "@" + m.version
		c := cdxComponent{Type: "library", BOMRef: purl, Name: m.path, Version: m.version, PURL: purl}
		if h, ok := strings.CutPrefix(m.sum, "h1:"); ok {
			// go.sum's h1: is a SHA-256 (base64) of the module's file tree, not of an archive:
			// kept as a property, CycloneDX's hashes being of the component's bytes.
			c.Properties = append(c.Properties, cdxProperty{Name: "go.sum", Value: "h1:" + h})
		}
		in := make([]string, 0, len(m.in))
		for b := range m.in {
			in = append(in, b)
		}
		sort.Strings(in)
		c.Properties = append(c.Properties, cdxProperty{Name: "linked-into", Value: strings.Join(in, " ")})
		bom.Components = append(bom.Components, c)
	}
	bom.Components = append(bom.Components, bins...)
	sort.Slice(bom.Components, func(i, j int) bool { return bom.Components[i].BOMRef < bom.Components[j].BOMRef })
	return json.MarshalIndent(bom, "", "  ")
}
