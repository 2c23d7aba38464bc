package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/switchboard-dev/switchboard/internal/local/image"
)

// annotationCreated is the OCI annotation with the release's time (SOURCE_DATE_EPOCH).
const annotationCreated = "org.opencontainers.image.created"

// emptyJSON is OCI 1.1's empty descriptor's content, the config of an artifact with no config.
const (
	emptyJSON          = "{}"
	emptyJSONMediaType = types.MediaType("application/vnd.oci.empty.v1+json")
)

// imageIndex assembles the multi-arch index from one binary per architecture (GOARCH →
// path), each image as `make image` builds it, with the release's labels; the index carries
// them as annotations.
func imageIndex(r *release, binaries map[string]string) (v1.ImageIndex, error) {
	ann := r.imageAnnotations()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range linuxArches {
		spec := image.Switchboard(binaries[arch], r.imageRef(), r.version, r.commit, r.caCerts)
		spec.Arch, spec.Created = arch, r.created
		for k, v := range ann {
			spec.Labels[k] = v
		}
		img, err := image.Build(spec)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return mutate.Annotations(idx, ann).(v1.ImageIndex), nil
}

// sbomManifest is the OCI 1.1 artifact manifest that attaches the SBOM to the index: its
// subject is the index, its artifactType CycloneDX's, its one layer the SBOM.
func sbomManifest(subject v1.Descriptor, sbom []byte, created string) (manifest []byte, blobs []v1.Layer, err error) {
	cfg := static.NewLayer([]byte(emptyJSON), emptyJSONMediaType)
	doc := static.NewLayer(sbom, SBOMMediaType)
	cfgDesc, err := descriptor(cfg)
	if err != nil {
		return nil, nil, err
	}
	docDesc, err := descriptor(doc)
	if err != nil {
		return nil, nil, err
	}
	docDesc.Annotations = map[string]string{"org.opencontainers.image.title": "sbom.cdx.json"}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: SBOMMediaType,
		Config: cfgDesc, Layers: []v1.Descriptor{docDesc},
		Subject:     &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations: map[string]string{annotationCreated: created}}
	b, err := json.Marshal(m)
	return b, []v1.Layer{cfg, doc}, err
}

func descriptor(l v1.Layer) (v1.Descriptor, error) {
	d, err := l.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	sz, err := l.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := l.MediaType()
	return v1.Descriptor{MediaType: mt, Digest: d, Size: sz}, err
}

// rawManifest is a manifest remote.Put writes as it is.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// writeLayout writes the index, its tag as ref.name, and the SBOM artifact into an OCI image
// layout directory.
func writeLayout(dir, tag string, idx v1.ImageIndex, sbomMf []byte, sbomBlobs []v1.Layer) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{image.AnnotationRefName: tag})); err != nil {
		return err
	}
	for _, l := range sbomBlobs {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		if err := p.WriteBlob(d, rc); err != nil {
			return err
		}
	}
	h, sz, err := v1.SHA256(bytes.NewReader(sbomMf))
	if err != nil {
		return err
	}
	if err := p.WriteBlob(h, io.NopCloser(bytes.NewReader(sbomMf))); err != nil {
		return err
	}
	return p.AppendDescriptor(v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: sz, ArtifactType: SBOMMediaType})
}

// push writes the index under its tag, then the SBOM artifact referring to it, to the
// registry; a registry on a loopback address may be plain HTTP.
func push(registry, tag string, idx v1.ImageIndex, sbomMf []byte, sbomBlobs []v1.Layer) error {
	ref, err := name.NewTag(registry+"/switchboard:"+tag, nameOptions(registry)...)
	if err != nil {
		return fmt.Errorf("RELEASE_REGISTRY %q: %w", registry, err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		return fmt.Errorf("pushing the image index to %s: %w", ref, err)
	}
	for _, l := range sbomBlobs {
		if err := remote.WriteLayer(ref.Context(), l); err != nil {
			return fmt.Errorf("pushing the SBOM to %s: %w", ref.Context(), err)
		}
	}
	h, _, err := v1.SHA256(bytes.NewReader(sbomMf))
	if err != nil {
		return err
	}
	if err := remote.Put(ref.Context().Digest(h.String()), rawManifest(sbomMf)); err != nil {
		return fmt.Errorf("attaching the SBOM to %s: %w", ref, err)
	}
	return nil
}

// nameOptions lets a registry on a loopback address (a test's, a local one) speak plain HTTP.
func nameOptions(registry string) []name.Option {
	host := strings.SplitN(registry, "/", 2)[0]
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return []name.Option{name.Insecure}
	}
	return nil
}
