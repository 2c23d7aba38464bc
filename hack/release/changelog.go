package main

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// semver is the only form of VERSION a release takes: vMAJOR.MINOR.PATCH, no pre-release.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// checkVersion refuses a version that is not vX.Y.Z, saying what it wants.
func checkVersion(v string) error {
	if !semver.MatchString(v) {
		return fmt.Errorf("VERSION %q is not a semantic version vMAJOR.MINOR.PATCH (e.g. v0.1.0)", v)
	}
	return nil
}

// changelogSection returns the body of CHANGELOG.md's section for version (vX.Y.Z), the lines
// under its heading `## [X.Y.Z]` (with or without " - date") up to the next `## ` heading,
// trimmed; an error when there is none, since a release says what it changes.
func changelogSection(changelog, version string) (string, error) {
	want := "## [" + strings.TrimPrefix(version, "v") + "]"
	var body []string
	in := false
	for line := range strings.SplitSeq(changelog, "\n") {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = line == want || strings.HasPrefix(line, want+" ")
			continue
		}
		if in {
			body = append(body, line)
		}
	}
	if !in {
		return "", fmt.Errorf("CHANGELOG.md has no section %q: move the Unreleased lines under `%s - YYYY-MM-DD` first", want, want)
	}
	s := strings.TrimSpace(strings.Join(body, "\n"))
	if s == "" {
		return "", fmt.Errorf("CHANGELOG.md's section %q is empty", want)
	}
	return s, nil
}

// change is one entry of Artifact Hub's artifacthub.io/changes annotation.
type change struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
}

// artifactHubKinds maps Keep a Changelog's subsections to Artifact Hub's change kinds.
var artifactHubKinds = map[string]string{
	"Added": "added", "Changed": "changed", "Deprecated": "deprecated",
	"Removed": "removed", "Fixed": "fixed", "Security": "security",
}

// changes turns a changelog section into Artifact Hub's changes: one per bullet (its
// continuation lines joined), of the kind its `### ` subsection names.
func changes(section string) ([]change, error) {
	var out []change
	kind := ""
	for line := range strings.SplitSeq(section, "\n") {
		switch {
		case strings.HasPrefix(line, "### "):
			name := strings.TrimSpace(strings.TrimPrefix(line, "### "))
			k, ok := artifactHubKinds[name]
			if !ok {
				return nil, fmt.Errorf("CHANGELOG.md: subsection %q is none of Keep a Changelog's (Added, Changed, Deprecated, Removed, Fixed, Security)", name)
			}
			kind = k
		case strings.HasPrefix(line, "- "):
			if kind == "" {
				return nil, fmt.Errorf("CHANGELOG.md: %q is under no subsection", line)
			}
			out = append(out, change{Kind: kind, Description: strings.TrimPrefix(line, "- ")})
		case strings.TrimSpace(line) != "" && len(out) > 0:
			out[len(out)-1].Description += " " + strings.TrimSpace(line)
		}
	}
	return out, nil
}

// changesAnnotation is the YAML list Artifact Hub reads from artifacthub.io/changes.
func changesAnnotation(section string) (string, error) {
	cs, err := changes(section)
	if err != nil {
		return "", err
	}
	b, err := yaml.Marshal(cs)
	return string(b), err
}
