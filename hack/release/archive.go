package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// member is one file of a release archive.
type member struct {
	name string
	mode int64
	data []byte
}

// members reads the binary and the files every archive carries (LICENSE, README.md) from root.
func members(binary, nameInArchive, root string) ([]member, error) {
	ms := []member{{name: nameInArchive, mode: 0o755}}
	var err error
	if ms[0].data, err = os.ReadFile(filepath.Clean(binary)); err != nil {
		return nil, err
	}
	for _, f := range []string{"LICENSE", "README.md"} {
		b, err := os.ReadFile(filepath.Join(root, f)) //nolint:gosec // LICENSE and README.md of the working tree
		if err != nil {
			return nil, fmt.Errorf("every archive carries %s: %w", f, err)
		}
		ms = append(ms, member{name: f, mode: 0o644, data: b})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].name < ms[j].name })
	return ms, nil
}

// tarGz writes ms as a gzipped tar with nothing of this machine or this moment in it: every
// member's time is mtime, its owner 0:0 without names, in the order given; gzip's header has no
// name and no time. The same inputs give the same bytes.
func tarGz(ms []member, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, m := range ms {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: m.name, Mode: m.mode, Size: int64(len(m.data)),
			ModTime: mtime.UTC(), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(m.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// zipArchive writes ms as a zip (the archive Windows users open), deterministically as tarGz.
func zipArchive(ms []member, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range ms {
		h := &zip.FileHeader{Name: m.name, Method: zip.Deflate, Modified: mtime.UTC()}
		h.SetMode(os.FileMode(m.mode)) //nolint:gosec // 0o755 or 0o644, set above
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(m.data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checksums is checksums.txt for the files named, in sha256sum's format (`sha256sum -c` checks
// it), sorted by name.
func checksums(dir string, names []string) (string, error) {
	names = append([]string(nil), names...)
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n)) //nolint:gosec // the artifacts this release just wrote
		if err != nil {
			return "", err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), n)
	}
	return b.String(), nil
}
