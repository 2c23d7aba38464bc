package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"v0.1.0", true},
		{"v1.20.3", true},
		{"0.1.0", false},
		{"v0.1", false},
		{"v0.1.0-rc.1", false},
		{"v01.1.0", false},
		{"1c78f22", false},
		{"v0.1.0-dirty", false},
		{"", false},
	} {
		if err := checkVersion(tc.version); (err == nil) != tc.ok {
			t.Errorf("checkVersion(%q) = %v, want ok %v", tc.version, err, tc.ok)
		}
	}
}

const changelog = `# Changelog

## [Unreleased]

### Added
- Next.

## [0.2.0] - 2026-12-01

### Added
- Two.
  Continued.

### Security
- Fixed a leak.

## [0.1.0]

### Added
- One.

## [0.0.1] - 2026-01-01
`

func TestChangelogSection(t *testing.T) {
	for _, tc := range []struct {
		version, want, err string
	}{
		{version: "v0.2.0", want: "### Added\n- Two.\n  Continued.\n\n### Security\n- Fixed a leak."},
		{version: "v0.1.0", want: "### Added\n- One."},
		{version: "v0.3.0", err: `no section "## [0.3.0]"`},
		{version: "v0.0.1", err: "is empty"},
		{version: "v0.2.00", err: `no section`},
	} {
		got, err := changelogSection(changelog, tc.version)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("changelogSection(%s) = %q, %v; want an error saying %q", tc.version, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("changelogSection(%s) = %q, %v; want %q", tc.version, got, err, tc.want)
		}
	}
}

func TestChanges(t *testing.T) {
	for _, tc := range []struct {
		name, section string
		want          []change
		err           string
	}{
		{name: "kinds and continuations", section: "### Added\n- Two.\n  Continued.\n\n### Security\n- Fixed a leak.",
			want: []change{{"added", "Two. Continued."}, {"security", "Fixed a leak."}}},
		{name: "every kind", section: "### Changed\n- a\n### Deprecated\n- b\n### Removed\n- c\n### Fixed\n- d",
			want: []change{{"changed", "a"}, {"deprecated", "b"}, {"removed", "c"}, {"fixed", "d"}}},
		{name: "unknown subsection", section: "### Improved\n- a", err: `"Improved" is none of`},
		{name: "bullet outside a subsection", section: "- a", err: "under no subsection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := changes(tc.section)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("changes = %v, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("changes = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestRunRefuses checks that a release stops before building anything when its version or
// its changelog is wrong.
func TestRunRefuses(t *testing.T) {
	dir := t.TempDir()
	cl := filepath.Join(dir, "CHANGELOG.md")
	if err := os.WriteFile(cl, []byte(changelog), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ version, err string }{
		{"0.2.0", "not a semantic version"},
		{"v0.3.0", "CHANGELOG.md has no section"},
	} {
		r := &release{version: tc.version, changelog: cl, dir: filepath.Join(dir, "out")}
		if err := r.run(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("a release of %s: %v, want an error saying %q", tc.version, err, tc.err)
		}
	}
}

// TestArchivesAreStamped checks that the archives carry nothing of the moment or the machine
// they are made on: member times are SOURCE_DATE_EPOCH's, owners 0:0 without names, gzip's
// header has no name and no time.
func TestArchivesAreStamped(t *testing.T) {
	epoch := time.Unix(1767225600, 0).UTC()
	ms := []member{{name: "LICENSE", mode: 0o644, data: []byte("license")}, {name: "bin", mode: 0o755, data: []byte("binary")}}
	b, err := tarGz(ms, epoch)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header: time %s, name %q; want none", zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(epoch) || !h.AccessTime.IsZero() || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: %+v, want the epoch's time and owner 0:0 without names", h.Name, h)
		}
	}
	if !slices.Equal(names, []string{"LICENSE", "bin"}) {
		t.Errorf("members %v, want LICENSE, bin in order", names)
	}
	zb, err := zipArchive(ms, epoch)
	if err != nil {
		t.Fatal(err)
	}
	zipr, err := zip.NewReader(bytes.NewReader(zb), int64(len(zb)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zipr.File {
		if !f.Modified.Equal(epoch) {
			t.Errorf("zip: %s's time is %s, want %s", f.Name, f.Modified, epoch)
		}
	}
}

func TestChecksums(t *testing.T) {
	dir := t.TempDir()
	for f, s := range map[string]string{"b.tar.gz": "b", "a.zip": "a"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := checksums(dir, []string{"b.tar.gz", "a.zip"})
	if err != nil {
		t.Fatal(err)
	}
	// sha256sum's output for the two files, sorted by name.
	want := "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb  a.zip\n" +
		"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b.tar.gz\n"
	if got != want {
		t.Errorf("checksums:\n%s\nwant:\n%s", got, want)
	}
}
