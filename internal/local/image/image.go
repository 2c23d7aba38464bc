// Package image assembles switchboard's container image without a container engine or a
// registry, with go-containerregistry: the files of gcr.io/distroless/static:nonroot (the
// Dockerfile's base, which cannot be pulled here) rebuilt from their known contents, plus one
// static binary, with the Dockerfile's user, entrypoint and OCI labels. The result is an OCI
// image layout in a tarball, which `ctr images import` loads. test/dockerfile keeps this image
// and the Dockerfile in agreement.
package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The OCI annotations and labels the image and its index carry.
const (
	// AnnotationRefName names the image in an OCI layout's index (its tag).
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is the full name `ctr images import` gives the image.
	AnnotationContainerdName = "io.containerd.image.name"
	// LabelVersion is the OCI label with switchboard's version.
	LabelVersion = "org.opencontainers.image.version"
	// LabelSource is the OCI label with the source repository.
	LabelSource = "org.opencontainers.image.source"
	// LabelTitle is the OCI label with the image's title.
	LabelTitle = "org.opencontainers.image.title"
	// LabelRevision is the OCI label with the git commit the image is built from.
	LabelRevision = "org.opencontainers.image.revision"
	// LabelLicenses is the OCI label with the SPDX expression of the image's license.
	LabelLicenses = "org.opencontainers.image.licenses"
)

// License is switchboard's license (LICENSE at the repository's root), as an SPDX identifier.
const License = "Apache-2.0"

// Source is the repository the image is built from (its org.opencontainers.image.source).
const Source = "https://github.com/switchboard-dev/switchboard"

// NonRoot is the user distroless's nonroot images run as, and switchboard's.
const NonRoot = "65532:65532"

// Spec describes one image: a binary on top of an optional distroless-like base.
type Spec struct {
	// Name is the reference the image is imported as, e.g. localhost/switchboard:v1.
	Name string
	// Binary is the path of the static binary on this machine.
	Binary string
	// Path is where the binary goes in the image; it is also the entrypoint.
	Path string
	// User is the uid:gid the image runs as.
	User string
	// Labels are the image's OCI labels.
	Labels map[string]string
	// Distroless adds the files of distroless static:nonroot (passwd, group, CA certificates,
	// /tmp, /home/nonroot) and its environment and working directory.
	Distroless bool
	// CACerts is the CA bundle put at /etc/ssl/certs/ca-certificates.crt when Distroless;
	// empty: none.
	CACerts string
	// Created is the time stamped on the image and its files; the zero time keeps builds
	// reproducible.
	Created time.Time
	// Arch is the image's GOARCH, which must be the binary's; empty: this machine's (a release
	// builds one image per architecture of its index).
	Arch string
}

// Switchboard is the spec of switchboard's image, as the Dockerfile describes it: version and
// revision are the build's (git describe, git commit).
func Switchboard(binary, name, version, revision, caCerts string) Spec {
	return Spec{
		Name:       name,
		Binary:     binary,
		Path:       "/switchboard",
		User:       NonRoot,
		Distroless: true,
		CACerts:    caCerts,
		Labels: map[string]string{
			LabelTitle:    "switchboard",
			LabelSource:   Source,
			LabelVersion:  version,
			LabelRevision: revision,
			LabelLicenses: License,
		},
	}
}

// Pause is the spec of the sandbox ("pause") image the test cluster's containerd runs for
// every pod: one static binary, as registry.k8s.io/pause is, running as 65535.
func Pause(binary, name string) Spec {
	return Spec{Name: name, Binary: binary, Path: "/pause", User: "65535:65535",
		Labels: map[string]string{LabelTitle: "pause", LabelSource: Source}}
}

// Consumer is the test cluster's client image (hack/consumer): its binary, run as nonroot.
func Consumer(binary, name string) Spec {
	return Spec{Name: name, Binary: binary, Path: "/consumer", User: "65532:65532",
		Labels: map[string]string{LabelTitle: "consumer", LabelSource: Source}}
}

// distrolessEnv and distrolessWorkDir are the configuration distroless static:nonroot sets.
var (
	distrolessEnv = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	}
	distrolessWorkDir = "/home/nonroot"
)

// Passwd and Group are distroless's /etc/passwd and /etc/group: root, nobody and nonroot.
const (
	Passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	Group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"tty:x:5:\n" +
		"staff:x:50:\n" +
		"nonroot:x:65532:\n"
	nsswitch = "hosts: files dns\n"
)

// entry is one file or directory of a layer.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// baseEntries are the files of the distroless-like base layer.
func baseEntries(caCerts []byte) []entry {
	es := []entry{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(Passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(Group)},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte(nsswitch)},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, uid: 65532, gid: 65532, dir: true},
		{name: "root", mode: 0o700, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}
	if caCerts != nil {
		es = append(es,
			entry{name: "etc/ssl", mode: 0o755, dir: true},
			entry{name: "etc/ssl/certs", mode: 0o755, dir: true},
			entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: caCerts})
	}
	return es
}

// binaryEntries are the directories leading to the binary and the binary itself.
func binaryEntries(imagePath string, bin []byte) []entry {
	rel := path.Clean(imagePath)[1:]
	var es []entry
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		es = append([]entry{{name: dir, mode: 0o755, dir: true}}, es...)
	}
	return append(es, entry{name: rel, mode: 0o755, data: bin})
}

// layerTar writes entries as a tar stream, in order, with fixed times and owners.
func layerTar(entries []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func layer(entries []entry, mtime time.Time) (v1.Layer, error) {
	b, err := layerTar(entries, mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// Build assembles the image s describes, for this machine's architecture.
func Build(s Spec) (v1.Image, error) {
	if s.Path == "" || !path.IsAbs(s.Path) {
		return nil, fmt.Errorf("image %s: the binary's path in the image must be absolute, not %q", s.Name, s.Path)
	}
	bin, err := os.ReadFile(filepath.Clean(s.Binary))
	if err != nil {
		return nil, fmt.Errorf("image %s: reading the binary: %w", s.Name, err)
	}
	var layers []v1.Layer
	cfg := v1.Config{User: s.User, Entrypoint: []string{s.Path}, Labels: s.Labels}
	if s.Distroless {
		var certs []byte
		if s.CACerts != "" {
			if certs, err = os.ReadFile(filepath.Clean(s.CACerts)); err != nil {
				return nil, fmt.Errorf("image %s: reading the CA bundle: %w", s.Name, err)
			}
		}
		base, err := layer(baseEntries(certs), s.Created)
		if err != nil {
			return nil, err
		}
		layers = append(layers, base)
		cfg.Env, cfg.WorkingDir = distrolessEnv, distrolessWorkDir
	}
	app, err := layer(binaryEntries(s.Path, bin), s.Created)
	if err != nil {
		return nil, err
	}
	layers = append(layers, app)

	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", s.Arch
	if cf.Architecture == "" {
		cf.Architecture = runtime.GOARCH
	}
	cf.Created = v1.Time{Time: s.Created}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// Files lists the paths of an image's files and directories (without a leading slash), for
// checks; the content of each regular file is returned when want names it.
func Files(img v1.Image, want ...string) (names []string, contents map[string][]byte, err error) {
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w] = true
	}
	contents = map[string][]byte{}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		name := path.Clean(h.Name)
		names = append(names, name)
		if wanted[name] && h.Typeflag == tar.TypeReg {
			if contents[name], err = io.ReadAll(tr); err != nil {
				return nil, nil, err
			}
		}
	}
	sort.Strings(names)
	return names, contents, nil
}
