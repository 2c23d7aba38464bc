package image

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fakeBinary writes a file to stand for a binary; the image does not run it.
func fakeBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBinaryEntries(t *testing.T) {
	tests := []struct {
		path string
		want []string
	}{
		{"/switchboard", []string{"switchboard"}},
		{"/usr/local/bin/x", []string{"usr", "usr/local", "usr/local/bin", "usr/local/bin/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			var got []string
			for _, e := range binaryEntries(tt.path, nil) {
				got = append(got, e.name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("binaryEntries(%q) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	bin := fakeBinary(t)
	certs := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		spec       Spec
		user       string
		entrypoint string
		files      []string
		absent     []string
		workDir    string
		labels     map[string]string // when set, the image's labels
	}{
		{
			name: "switchboard", spec: Switchboard(bin, "localhost/switchboard:v1", "v1", "0123abc", certs),
			user: "65532:65532", entrypoint: "/switchboard", workDir: "/home/nonroot",
			labels: map[string]string{LabelTitle: "switchboard", LabelSource: Source, LabelVersion: "v1", LabelRevision: "0123abc", LabelLicenses: "Apache-2.0"},
			files:  []string{"switchboard", "etc/passwd", "etc/group", "etc/nsswitch.conf", "etc/ssl/certs/ca-certificates.crt", "tmp", "home/nonroot"},
		},
		{
			name: "switchboard without CA certificates", spec: Switchboard(bin, "localhost/switchboard:v1", "v1", "0123abc", ""),
			user: "65532:65532", entrypoint: "/switchboard", workDir: "/home/nonroot",
			files: []string{"switchboard", "etc/passwd"}, absent: []string{"etc/ssl/certs/ca-certificates.crt"},
		},
		{
			name: "pause", spec: Pause(bin, "localhost/pause:1.0"),
			user: "65535:65535", entrypoint: "/pause",
			files: []string{"pause"}, absent: []string{"etc/passwd", "tmp"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := Build(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Config.User != tt.user || !slices.Equal(cf.Config.Entrypoint, []string{tt.entrypoint}) || cf.Config.WorkingDir != tt.workDir {
				t.Errorf("config: user %q, entrypoint %q, workdir %q; want %q, [%s], %q",
					cf.Config.User, cf.Config.Entrypoint, cf.Config.WorkingDir, tt.user, tt.entrypoint, tt.workDir)
			}
			if tt.labels != nil && !maps.Equal(cf.Config.Labels, tt.labels) {
				t.Errorf("labels %v, want %v", cf.Config.Labels, tt.labels)
			}
			if cf.OS != "linux" || !cf.Created.IsZero() {
				t.Errorf("config: os %q, created %s; want linux and no time (reproducible)", cf.OS, cf.Created)
			}
			files, contents, err := Files(img, "etc/passwd")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tt.files {
				if !slices.Contains(files, f) {
					t.Errorf("no /%s in %v", f, files)
				}
			}
			for _, f := range tt.absent {
				if slices.Contains(files, f) {
					t.Errorf("/%s is in the image; want it absent", f)
				}
			}
			if tt.spec.Distroless && string(contents["etc/passwd"]) != Passwd {
				t.Errorf("/etc/passwd is %q", contents["etc/passwd"])
			}
		})
	}
}

// TestBuildIsReproducible checks that the same inputs give the same image digest, so that an
// unchanged binary does not make a new image.
func TestBuildIsReproducible(t *testing.T) {
	bin := fakeBinary(t)
	a, err := Build(Switchboard(bin, "localhost/switchboard:v1", "v1", "0123abc", ""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(Switchboard(bin, "localhost/switchboard:v1", "v1", "0123abc", ""))
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds of the same binary: %s and %s", da, db)
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
	}{
		{"relative path in the image", Spec{Name: "x:1", Binary: fakeBinary(t), Path: "switchboard"}},
		{"missing binary", Spec{Name: "x:1", Binary: "/nonexistent/bin", Path: "/x"}},
		{"missing CA bundle", Spec{Name: "x:1", Binary: fakeBinary(t), Path: "/x", Distroless: true, CACerts: "/nonexistent/ca"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Build(tt.spec); err == nil {
				t.Error("Build succeeded, want an error")
			}
		})
	}
}

func TestTarballRoundTrip(t *testing.T) {
	img, err := Build(Pause(fakeBinary(t), "localhost/pause:1.0"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pause.tar")
	if err := WriteTarball(img, "localhost/pause:1.0", out); err != nil {
		t.Fatal(err)
	}
	name, err := TarballName(out)
	if err != nil || name != "localhost/pause:1.0" {
		t.Errorf("TarballName = %q, %v; want localhost/pause:1.0", name, err)
	}
	name, back, err := ReadTarball(out, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	got, _ := back.Digest()
	if name != "localhost/pause:1.0" || got != want {
		t.Errorf("read back %s %s, want localhost/pause:1.0 %s", name, got, want)
	}
	if err := WriteTarball(img, "Not A Name!", filepath.Join(t.TempDir(), "x.tar")); err == nil {
		t.Error("WriteTarball accepted an invalid image name")
	}
}
