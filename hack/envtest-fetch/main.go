// Command envtest-fetch downloads the control plane `switchboard dev` runs (etcd, kube-apiserver
// and kubectl) from a setup-envtest index instead of building it, trusting only the SHA-512
// pinned in the repository. hack/envtest.sh runs it before building from source.
//
// The index is controller-tools' envtest-releases.yaml, the one controller-runtime's
// setup-envtest reads:
//
//	releases:
//	  v1.36.3:
//	    envtest-v1.36.3-linux-amd64.tar.gz:
//	      hash: <sha512 hex>
//	      selfLink: <URL of the tarball>
//
// and each tarball holds controller-tools/envtest/{etcd,kube-apiserver,kubectl}. The pin file
// (hack/envtest.sha512, in sha512sum's format) is the trust root, as go.sum is: a tarball with
// no pin is never downloaded, and an index or a tarball whose hash differs from the pin is
// refused. Downloads are unpacked once per user into the cache
// (${XDG_CACHE_HOME:-~/.cache}/switchboard/envtest/<version>-<os>-<arch>) and linked or copied
// from there into -dest, so every clone shares them.
//
// Exit status: 0 when -dest has the binaries; 2 when they cannot be downloaded (no pin, index
// or tarball unreachable, no entry in the index) and the caller should build them; 1 on
// anything else, a checksum mismatch or a malformed tarball included, which nothing should
// paper over by building.
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// DefaultIndexURL is setup-envtest's index, controller-tools' list of envtest tarballs.
const DefaultIndexURL = "https://raw.githubusercontent.com/kubernetes-sigs/controller-tools/HEAD/envtest-releases.yaml"

// Binaries are what the tarballs hold and what `switchboard dev` needs: its control plane
// (etcd, kube-apiserver) and the kubectl its instructions use.
var Binaries = []string{"etcd", "kube-apiserver", "kubectl"}

// tarballDir is the directory of the binaries inside an envtest tarball.
const tarballDir = "controller-tools/envtest"

// exitFallback tells the caller to build from source instead.
const exitFallback = 2

// ErrUnavailable marks a failure that building from source answers: no pin, or nothing to
// download from where the index says. Any other error is a refusal.
var ErrUnavailable = errors.New("unavailable")

// Options say what to fetch, from where, and where to put it.
type Options struct {
	// Version is the Kubernetes release without its "v", e.g. 1.36.3.
	Version string
	// OS and Arch name the platform, as GOOS and GOARCH do.
	OS, Arch string
	// IndexURL is where the envtest-releases.yaml index is.
	IndexURL string
	// PinFile holds the trusted SHA-512 of each tarball, in sha512sum's format.
	PinFile string
	// CacheDir is the per-user cache; the unpacked binaries go to CacheDir/<version>-<os>-<arch>.
	CacheDir string
	// Dest is the directory the binaries end up in (bin/k8s/<version>).
	Dest string
	// Client downloads the index and the tarball.
	Client *http.Client
	// Log receives one line saying which path was taken.
	Log io.Writer
}

// ArchiveName is the tarball's name in the index, as controller-tools names it.
func ArchiveName(version, goos, goarch string) string {
	return fmt.Sprintf("envtest-v%s-%s-%s.tar.gz", version, goos, goarch)
}

// Fetch puts the binaries in o.Dest: from the cache when they are there, else from the index.
// An error wrapping ErrUnavailable means they could not be downloaded and should be built.
func Fetch(ctx context.Context, o Options) error {
	name := ArchiveName(o.Version, o.OS, o.Arch)
	cached := filepath.Join(o.CacheDir, fmt.Sprintf("%s-%s-%s", o.Version, o.OS, o.Arch))
	if !hasAll(cached) {
		pin, err := readPin(o.PinFile, name)
		if err != nil {
			return err
		}
		if err := download(ctx, o, name, pin, cached); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.Log, "envtest: using %s (cached)\n", cached)
	}
	return install(cached, o.Dest)
}

// readPin returns the pinned hash of the named tarball.
func readPin(path, name string) (string, error) {
	data, err := os.ReadFile(path) //nolint:gosec // the repository's pin file, or the one the caller names
	if err != nil {
		return "", fmt.Errorf("reading the pins: %w", err)
	}
	pins, err := ParsePins(string(data))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	pin, ok := pins[name]
	if !ok {
		return "", fmt.Errorf("no SHA-512 pinned for %s in %s: %w", name, path, ErrUnavailable)
	}
	return pin, nil
}

// ParsePins reads sha512sum's output ("<128 hex digits>  <file name>" a line; "#" starts a
// comment) into a map from file name to lower-case hex hash.
func ParsePins(text string) (map[string]string, error) {
	pins := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"<sha512 hex>  <tarball name>\", got %q", i+1, line)
		}
		hash, name := strings.ToLower(fields[0]), strings.TrimPrefix(fields[1], "*")
		if b, err := hex.DecodeString(hash); err != nil || len(b) != sha512.Size {
			return nil, fmt.Errorf("line %d: %q is not a SHA-512 in hex", i+1, fields[0])
		}
		if _, dup := pins[name]; dup {
			return nil, fmt.Errorf("line %d: %s is pinned twice", i+1, name)
		}
		pins[name] = hash
	}
	return pins, nil
}

// index is setup-envtest's index: releases, by version, of tarballs by name.
type index struct {
	Releases map[string]map[string]archive `json:"releases"`
}

// archive is one tarball of the index.
type archive struct {
	Hash     string `json:"hash"`
	SelfLink string `json:"selfLink"`
}

// download fetches the index and the named tarball, checks both against the pin, and unpacks
// the tarball into cached.
func download(ctx context.Context, o Options, name, pin, cached string) error {
	body, err := get(ctx, o.Client, o.IndexURL)
	if err != nil {
		return fmt.Errorf("index unreachable (%w): %w", err, ErrUnavailable)
	}
	data, err := io.ReadAll(io.LimitReader(body, 16<<20))
	_ = body.Close()
	if err != nil {
		return fmt.Errorf("index unreachable (reading %s: %w): %w", o.IndexURL, err, ErrUnavailable)
	}
	var idx index
	if err := yaml.Unmarshal(data, &idx); err != nil {
		return fmt.Errorf("the index at %s is not an envtest-releases.yaml: %w", o.IndexURL, err)
	}
	var entry *archive
	for _, release := range idx.Releases {
		if a, ok := release[name]; ok {
			entry = &a
			break
		}
	}
	if entry == nil {
		return fmt.Errorf("the index at %s has no %s: %w", o.IndexURL, name, ErrUnavailable)
	}
	if !strings.EqualFold(entry.Hash, pin) {
		return fmt.Errorf("the index at %s gives %s the SHA-512 %s, not the pinned %s: refusing it", o.IndexURL, name, entry.Hash, pin)
	}

	tarball, err := get(ctx, o.Client, entry.SelfLink)
	if err != nil {
		return fmt.Errorf("%s unreachable (%w): %w", name, err, ErrUnavailable)
	}
	defer func() { _ = tarball.Close() }()
	if err := os.MkdirAll(o.CacheDir, 0o750); err != nil {
		return err
	}
	// Download and unpack beside the cache entry and rename it into place once whole and
	// checked, so that an interrupted or refused download leaves nothing behind and two
	// clones fetching at once both end with a complete entry.
	tmp, err := os.MkdirTemp(o.CacheDir, ".download-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	// The tarball is checked against the pin before a byte of it is unpacked.
	f, err := os.Create(filepath.Join(tmp, name)) //nolint:gosec // the index's name, looked up by ours
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	h := sha512.New()
	if _, err := io.Copy(io.MultiWriter(f, h), tarball); err != nil {
		return fmt.Errorf("%s unreachable (reading %s: %w): %w", name, entry.SelfLink, err, ErrUnavailable)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(sum, pin) {
		return fmt.Errorf("%s from %s has the SHA-512 %s, not the pinned %s: refusing it", name, entry.SelfLink, sum, pin)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	bins := filepath.Join(tmp, "bin")
	if err := os.Mkdir(bins, 0o750); err != nil {
		return err
	}
	if err := unpack(f, bins); err != nil {
		return fmt.Errorf("%s from %s: %w", name, entry.SelfLink, err)
	}
	if err := os.Rename(bins, cached); err != nil && !hasAll(cached) {
		return fmt.Errorf("caching %s (remove %s if it is incomplete): %w", name, cached, err)
	}
	fmt.Fprintf(o.Log, "envtest: downloaded %s from %s (SHA-512 as pinned in %s) into %s\n", name, entry.SelfLink, o.PinFile, cached)
	return nil
}

// get opens url's body, or says why not.
func get(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

// unpack writes the binaries of a gzipped envtest tarball into dir. The tarball must hold
// exactly controller-tools/envtest/{etcd,kube-apiserver,kubectl} as regular files (and the
// directories above them): anything else, a path outside it, a link or an extra file, is
// refused rather than skipped, since the tarball is whatever the index pointed at.
func unpack(r io.Reader, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("not a gzip file: %w", err)
	}
	want := map[string]bool{}
	for _, b := range Binaries {
		want[tarballDir+"/"+b] = true
	}
	got := map[string]bool{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the tarball: %w", err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		switch {
		case hdr.Typeflag == tar.TypeDir && (strings.TrimSuffix(name, "/") == "controller-tools" || strings.TrimSuffix(name, "/") == tarballDir):
			continue
		case hdr.Typeflag != tar.TypeReg || !want[name]:
			return fmt.Errorf("unexpected entry %q in the tarball (want only %s/{%s}): refusing it", hdr.Name, tarballDir, strings.Join(Binaries, ","))
		case got[name]:
			return fmt.Errorf("%q is twice in the tarball: refusing it", hdr.Name)
		}
		got[name] = true
		if err := writeFile(filepath.Join(dir, filepath.Base(name)), tr); err != nil {
			return err
		}
	}
	// The gzip trailer holds the checksum of the whole stream: read to it. The stream is the
	// pinned tarball, not a bomb.
	if _, err := io.Copy(io.Discard, gz); err != nil { //nolint:gosec // checked against the pin before unpacking
		return fmt.Errorf("reading the tarball: %w", err)
	}
	for _, b := range Binaries {
		if !got[tarballDir+"/"+b] {
			return fmt.Errorf("the tarball has no %s/%s", tarballDir, b)
		}
	}
	return nil
}

// writeFile writes an executable from r.
func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755) //nolint:gosec // a fixed binary name inside a directory this tool made
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// hasAll reports whether dir holds every binary.
func hasAll(dir string) bool {
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return false
		}
	}
	return true
}

// install hard-links (or, across file systems, copies) each binary missing from dest from
// the cache.
func install(cached, dest string) error {
	if err := os.MkdirAll(dest, 0o750); err != nil {
		return err
	}
	for _, b := range Binaries {
		to := filepath.Join(dest, b)
		if _, err := os.Stat(to); err == nil {
			continue
		}
		from := filepath.Join(cached, b)
		if err := os.Link(from, to); err == nil {
			continue
		}
		if err := copyFile(from, to); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies an executable through a temporary file, so dest never has half a binary.
func copyFile(from, to string) error {
	in, err := os.Open(from) //nolint:gosec // a binary of the cache
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	if err := writeFile(to+".tmp", in); err != nil {
		_ = os.Remove(to + ".tmp")
		return err
	}
	return os.Rename(to+".tmp", to)
}

// DefaultCacheDir is ${XDG_CACHE_HOME:-~/.cache}/switchboard/envtest.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "switchboard", "envtest"), nil
}

// NewClient gives up quickly on an index it cannot reach (a machine without internet falls
// back to building within seconds) but lets a reachable download take its time.
func NewClient(connectTimeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connectTimeout}).DialContext
	t.TLSHandshakeTimeout = connectTimeout
	t.ResponseHeaderTimeout = 2 * connectTimeout
	return &http.Client{Transport: t}
}

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stderr)) }

// run is main with its inputs passed in, returning the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o := Options{OS: runtime.GOOS, Arch: runtime.GOARCH, Log: stderr}
	cache, cacheErr := DefaultCacheDir()
	index := getenv("ENVTEST_INDEX_URL")
	if index == "" {
		index = DefaultIndexURL
	}
	fs := flag.NewFlagSet("envtest-fetch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Version, "version", "", "Kubernetes release to fetch, without its v (hack/kube-version)")
	fs.StringVar(&o.Dest, "dest", "", "directory to put "+strings.Join(Binaries, ", ")+" in")
	fs.StringVar(&o.IndexURL, "index", index, "URL of the envtest-releases.yaml index ($ENVTEST_INDEX_URL)")
	fs.StringVar(&o.PinFile, "pins", "hack/envtest.sha512", "file of the trusted SHA-512 of each tarball, in sha512sum's format")
	fs.StringVar(&o.CacheDir, "cache", cache, "per-user cache of unpacked tarballs")
	timeout := fs.Duration("connect-timeout", 5*time.Second, "give up on an index or tarball not connected within this")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if o.Version == "" || o.Dest == "" {
		fmt.Fprintln(stderr, "envtest-fetch: -version and -dest are required")
		return 1
	}
	if o.CacheDir == "" {
		fmt.Fprintf(stderr, "envtest-fetch: no cache directory (%v): pass -cache\n", cacheErr)
		return 1
	}
	o.Client = NewClient(*timeout)
	err := Fetch(ctx, o)
	switch {
	case err == nil:
		fmt.Fprintf(stderr, "envtest: %s in %s\n", strings.Join(Binaries, ", "), o.Dest)
		return 0
	case errors.Is(err, ErrUnavailable):
		fmt.Fprintf(stderr, "envtest: %s, building from source\n", strings.TrimSuffix(err.Error(), ": "+ErrUnavailable.Error()))
		return exitFallback
	default:
		fmt.Fprintf(stderr, "envtest: %v\n", err)
		return 1
	}
}
