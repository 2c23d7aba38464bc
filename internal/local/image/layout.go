package image

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// WriteTarball writes img as an OCI image layout in a tar file at out, its index naming it
// ref (the full name for containerd, the tag as OCI's ref.name).
func WriteTarball(img v1.Image, ref, out string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		AnnotationContainerdName: tag.Name(),
		AnnotationRefName:        tag.TagStr(),
	})); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return os.Rename(tmp, out)
}

// tarDir writes the files under dir into a tar file, in lexical order, with fixed times.
func tarDir(dir, out string) (err error) {
	f, err := os.Create(filepath.Clean(out))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: filepath.ToSlash(rel) + "/", Mode: 0o755})
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: filepath.ToSlash(rel), Mode: 0o644, Size: info.Size()}); err != nil {
			return err
		}
		src, err := os.Open(filepath.Clean(p)) //nolint:gosec // the layout this package just wrote
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// ReadTarball unpacks an OCI layout tarball written by WriteTarball into dir (which must stay
// until the image is no longer read) and returns the name its index gives the one image in
// it, and the image.
func ReadTarball(tarball, dir string) (string, v1.Image, error) {
	f, err := os.Open(filepath.Clean(tarball))
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", nil, fmt.Errorf("reading %s: %w", tarball, err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
			return "", nil, fmt.Errorf("reading %s: %q leaves the layout", tarball, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o750); err != nil {
				return "", nil, err
			}
		case tar.TypeReg:
			if err := writeFile(target, tr); err != nil {
				return "", nil, err
			}
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", nil, fmt.Errorf("%s is no OCI image layout: %w", tarball, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return "", nil, err
	}
	if len(m.Manifests) != 1 {
		return "", nil, fmt.Errorf("%s holds %d images, want 1", tarball, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return "", nil, err
	}
	return m.Manifests[0].Annotations[AnnotationContainerdName], img, nil
}

func writeFile(path string, r io.Reader) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.Create(filepath.Clean(path))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	_, err = io.Copy(f, r) //nolint:gosec // an image layout this package wrote; blobs are small
	return err
}

// TarballName returns the name the index of an OCI layout tarball gives its one image.
func TarballName(tarball string) (string, error) {
	f, err := os.Open(filepath.Clean(tarball))
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s has no index.json", tarball)
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", tarball, err)
		}
		if path.Clean(h.Name) != "index.json" {
			continue
		}
		var idx v1.IndexManifest
		if err := json.NewDecoder(tr).Decode(&idx); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", tarball, err)
		}
		if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[AnnotationContainerdName] == "" {
			return "", fmt.Errorf("%s: want one image with an %s annotation", tarball, AnnotationContainerdName)
		}
		return idx.Manifests[0].Annotations[AnnotationContainerdName], nil
	}
}
