// Command envtest-fetch downloads the Kubernetes binaries hack/envtest.sh would otherwise build
// (etcd, kube-apiserver and kubectl, which `switchboard dev` runs; kube-controller-manager,
// kube-scheduler, the kubelet and kube-proxy, which the tests run) from the two projects' own
// release artifacts, trusting only the SHA-512 pinned in the repository.
//
// Kubernetes publishes each binary of each release at
// <kubernetes-url>/v<version>/bin/<os>/<arch>/<name>, and etcd its release archive at
// <etcd-url>/v<version>/etcd-v<version>-<os>-<arch>.tar.gz (.zip on darwin), holding
// etcd-v<version>-<os>-<arch>/etcd. The pin file (hack/envtest.sha512) is the trust root, as
// go.sum is: one line per artifact, "<version> <os>/<arch> <name> <sha512 hex>", etcd's line
// pinning its archive. An artifact with no line is never downloaded, and one whose SHA-512
// differs from its line is refused before any of it is kept: the .sha512 files published beside
// the artifacts are never read. A download goes once per user into the cache
// (${XDG_CACHE_HOME:-~/.cache}/switchboard/envtest/<name>-v<version>-<os>-<arch>) and is linked
// or copied from there into -dest, so every clone shares it; nothing is ever half in place.
//
// A binary that cannot be downloaded (no pin, a host that does not answer or stalls, a refused
// file) is named on stderr with why, in one line, and left for hack/envtest.sh to build from
// source. Exit status: 0 once each binary is in -dest or so named; 1 on bad flags or pins.
package main

import (
	"archive/tar"
	"archive/zip"
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
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Where each project publishes its releases: the defaults of -kubernetes-url and -etcd-url.
const (
	DefaultKubernetesURL = "https://dl.k8s.io"
	DefaultEtcdURL       = "https://github.com/etcd-io/etcd/releases/download"
)

// Binaries are what envtest-fetch may put in -dest: `switchboard dev`'s first three, then the
// rest of a node.
var Binaries = []string{"etcd", "kube-apiserver", "kubectl", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}

// Why a binary is left to be built; the error wrapping one says the rest.
var (
	ErrNoPin       = errors.New("no SHA-512 pinned")
	ErrUnreachable = errors.New("unreachable")
	ErrRefused     = errors.New("refused")
)

// Options say what to fetch, from where, and where to put it.
type Options struct {
	// Version is the Kubernetes release without its "v" (hack/kube-version); EtcdVersion is
	// etcd's, the one hack/tools/envtest/etcd builds.
	Version, EtcdVersion string
	// OS and Arch name the platform, as GOOS and GOARCH do.
	OS, Arch string
	// KubernetesURL and EtcdURL are where the releases are published, or mirrored.
	KubernetesURL, EtcdURL string
	// PinFile holds the trusted SHA-512 of each artifact.
	PinFile string
	// CacheDir is the per-user cache of downloaded binaries.
	CacheDir string
	// Dest is the directory the binaries end up in (bin/k8s/<version>).
	Dest string
	// Client downloads; StallTimeout gives up on a download that receives nothing for so long.
	Client       *http.Client
	StallTimeout time.Duration
	// Log receives a line for each binary downloaded or taken from the cache.
	Log io.Writer
}

// artifact is what is downloaded for one binary.
type artifact struct {
	name, version string
	url           string
	// member is the binary's path inside the archive; "" when the download is the binary.
	member string
}

func (o Options) artifact(name string) artifact {
	if name != "etcd" {
		return artifact{name: name, version: o.Version,
			url: fmt.Sprintf("%s/v%s/bin/%s/%s/%s", strings.TrimSuffix(o.KubernetesURL, "/"), o.Version, o.OS, o.Arch, name)}
	}
	dir := fmt.Sprintf("etcd-v%s-%s-%s", o.EtcdVersion, o.OS, o.Arch)
	ext := ".tar.gz"
	if o.OS == "darwin" {
		ext = ".zip"
	}
	return artifact{name: name, version: o.EtcdVersion, member: dir + "/etcd",
		url: fmt.Sprintf("%s/v%s/%s%s", strings.TrimSuffix(o.EtcdURL, "/"), o.EtcdVersion, dir, ext)}
}

// Fetch puts each named binary into o.Dest, from the cache or else downloaded, and returns
// why for each it could not, for the caller to build. Only a bad pin file is an error.
func Fetch(ctx context.Context, o Options, names []string) (map[string]error, error) {
	data, err := os.ReadFile(o.PinFile) //nolint:gosec // the repository's pin file, or the one the caller names
	if err != nil {
		return nil, fmt.Errorf("reading the pins: %w", err)
	}
	pins, err := ParsePins(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.PinFile, err)
	}
	down := map[string]error{} // hosts that did not answer, and why: each is given one chance
	missing := map[string]error{}
	for _, name := range names {
		if err := fetch(ctx, o, pins, down, o.artifact(name)); err != nil {
			missing[name] = err
		}
	}
	return missing, nil
}

// fetch puts one binary into o.Dest.
func fetch(ctx context.Context, o Options, pins map[string]string, down map[string]error, a artifact) error {
	cached := filepath.Join(o.CacheDir, fmt.Sprintf("%s-v%s-%s-%s", a.name, a.version, o.OS, o.Arch))
	if _, err := os.Stat(cached); err == nil {
		fmt.Fprintf(o.Log, "envtest: %s from the cache, %s\n", a.name, cached)
	} else {
		pin, ok := pins[PinKey(a.version, o.OS, o.Arch, a.name)]
		if !ok {
			return fmt.Errorf("%w for %s/%s in %s", ErrNoPin, o.OS, o.Arch, o.PinFile)
		}
		if err := download(ctx, o, down, a, pin, cached); err != nil {
			return err
		}
		fmt.Fprintf(o.Log, "envtest: downloaded %s from %s (SHA-512 as pinned)\n", a.name, a.url)
	}
	return install(cached, filepath.Join(o.Dest, a.name))
}

// PinKey is what a pin line says before its hash.
func PinKey(version, goos, goarch, name string) string {
	return version + " " + goos + "/" + goarch + " " + name
}

// ParsePins reads the pin file ("<version> <os>/<arch> <name> <sha512 hex>" a line; "#" starts
// a comment) into a map from PinKey to lower-case hex hash.
func ParsePins(text string) (map[string]string, error) {
	pins := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			return nil, fmt.Errorf("line %d: want \"<version> <os>/<arch> <name> <sha512 hex>\", got %q", i+1, line)
		}
		goos, goarch, _ := strings.Cut(f[1], "/")
		hash := strings.ToLower(f[3])
		switch b, err := hex.DecodeString(hash); {
		case f[0] == "" || strings.Trim(f[0], "0123456789.") != "":
			return nil, fmt.Errorf("line %d: %q is not a version such as 1.36.3 (no v)", i+1, f[0])
		case goos == "" || goarch == "" || strings.ContainsAny(goarch, "/"):
			return nil, fmt.Errorf("line %d: %q is not <os>/<arch>", i+1, f[1])
		case !slices.Contains(Binaries, f[2]):
			return nil, fmt.Errorf("line %d: %q is none of %s", i+1, f[2], strings.Join(Binaries, ", "))
		case err != nil || len(b) != sha512.Size:
			return nil, fmt.Errorf("line %d: %q is not a SHA-512 in hex", i+1, f[3])
		}
		key := PinKey(f[0], goos, goarch, f[2])
		if _, dup := pins[key]; dup {
			return nil, fmt.Errorf("line %d: %s is pinned twice", i+1, key)
		}
		pins[key] = hash
	}
	return pins, nil
}

// download fetches a's file, checks it against the pin and puts the binary at cached. It is
// written and checked beside the cache entry and renamed into place only once whole, checked
// and executable, so a refused or interrupted download leaves nothing behind and two clones
// downloading at once both end with a whole binary.
func download(ctx context.Context, o Options, down map[string]error, a artifact, pin, cached string) error {
	u, err := url.Parse(a.url)
	if err != nil {
		return err
	}
	if err := down[u.Host]; err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(o.StallTimeout, func() { cancel(fmt.Errorf("nothing received for %s", o.StallTimeout)) })
	defer timer.Stop()
	// A host that does not answer, or stalls, is given up for the rest of the run.
	unreachable := func(err error) error {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		} else if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		down[u.Host] = fmt.Errorf("%s %w: %w", u.Host, ErrUnreachable, err)
		return down[u.Host]
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	if err != nil {
		return err
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return unreachable(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %w: %s", a.url, ErrUnreachable, resp.Status)
	}
	if err := os.MkdirAll(o.CacheDir, 0o750); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(o.CacheDir, ".download-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	file := filepath.Join(tmp, path.Base(u.Path))
	// At most 1 GiB (the largest binary is about 100 MB): the pin refuses what a server sends past it.
	h := sha512.New()
	if err := writeFile(file, io.TeeReader(io.LimitReader(&progress{resp.Body, timer, o.StallTimeout}, 1<<30), h)); err != nil {
		return unreachable(err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != pin {
		return fmt.Errorf("%w %s: its SHA-512 is %s, not the %s pinned in %s", ErrRefused, a.url, sum, pin, o.PinFile)
	}
	if a.member != "" {
		bin := filepath.Join(tmp, a.name)
		if err := extract(file, a.member, bin); err != nil {
			return fmt.Errorf("%w %s: %w", ErrRefused, a.url, err)
		}
		file = bin
	}
	if err := os.Rename(file, cached); err != nil {
		return fmt.Errorf("caching %s: %w", a.name, err)
	}
	return nil
}

// progress resets the stall timer at every read that brings data: only silence stalls.
type progress struct {
	r     io.Reader
	timer *time.Timer
	stall time.Duration
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.timer.Reset(p.stall)
	}
	return n, err
}

// extract writes the archive's member, a regular file, to the executable to. The archive
// (.zip, else .tar.gz) is the pinned one; nothing else of it is written.
func extract(archive, member, to string) error {
	if strings.HasSuffix(archive, ".zip") {
		zr, err := zip.OpenReader(archive)
		if err != nil {
			return fmt.Errorf("not a zip file: %w", err)
		}
		defer func() { _ = zr.Close() }()
		for _, f := range zr.File {
			if f.Name == member && f.Mode().IsRegular() {
				r, err := f.Open()
				if err != nil {
					return err
				}
				defer func() { _ = r.Close() }()
				return writeFile(to, r)
			}
		}
		return fmt.Errorf("the archive has no %s", member)
	}
	f, err := os.Open(archive) //nolint:gosec // a file this tool wrote
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("not a gzip file: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("the archive has no %s", member)
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		if strings.TrimPrefix(hdr.Name, "./") == member && hdr.Typeflag == tar.TypeReg {
			return writeFile(to, tr)
		}
	}
}

// writeFile writes an executable from r.
func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755) //nolint:gosec // a fixed name inside a directory this tool made
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil { //nolint:gosec // a pinned download, bounded, or a member of one
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// install hard-links (or, across file systems, copies) the cached binary to dest unless it is
// there.
func install(cached, dest string) error {
	if _, err := os.Stat(dest); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o750); err != nil {
		return err
	}
	if err := os.Link(cached, dest); err == nil {
		return nil
	}
	// Through a temporary file, so dest never has half a binary.
	in, err := os.Open(cached) //nolint:gosec // a binary of the cache
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	if err := writeFile(dest+".tmp", in); err != nil {
		_ = os.Remove(dest + ".tmp")
		return err
	}
	return os.Rename(dest+".tmp", dest)
}

// NewClient gives up within connectTimeout on a host it cannot connect to (a machine without
// internet falls back to building within seconds); Options.StallTimeout bounds the rest.
func NewClient(connectTimeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connectTimeout}).DialContext
	t.TLSHandshakeTimeout = connectTimeout
	return &http.Client{Transport: t}
}

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stderr)) }

// run is main with its inputs passed in, returning the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o := Options{OS: runtime.GOOS, Arch: runtime.GOARCH, Log: stderr}
	cache, cacheErr := os.UserCacheDir() // ${XDG_CACHE_HOME:-~/.cache}
	if cacheErr == nil {
		cache = filepath.Join(cache, "switchboard", "envtest")
	}
	orDefault := func(env, def string) string {
		if v := getenv(env); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("envtest-fetch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Version, "version", "", "Kubernetes release, without its v (hack/kube-version)")
	fs.StringVar(&o.EtcdVersion, "etcd-version", "", "etcd release, without its v (hack/tools/envtest/etcd/go.mod)")
	fs.StringVar(&o.Dest, "dest", "", "directory to put the binaries in")
	fs.StringVar(&o.KubernetesURL, "kubernetes-url", orDefault("ENVTEST_KUBERNETES_URL", DefaultKubernetesURL), "where Kubernetes releases are ($ENVTEST_KUBERNETES_URL)")
	fs.StringVar(&o.EtcdURL, "etcd-url", orDefault("ENVTEST_ETCD_URL", DefaultEtcdURL), "where etcd releases are ($ENVTEST_ETCD_URL)")
	fs.StringVar(&o.PinFile, "pins", "hack/envtest.sha512", "file of the trusted SHA-512 of each artifact")
	fs.StringVar(&o.CacheDir, "cache", cache, "per-user cache of downloaded binaries")
	connect := fs.Duration("connect-timeout", 5*time.Second, "give up on a host not connected within this")
	fs.DurationVar(&o.StallTimeout, "stall-timeout", 30*time.Second, "give up on a host that sends nothing for this long")
	total := fs.Duration("timeout", 10*time.Minute, "give up on what is not downloaded within this (building takes about 15 minutes)")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	for _, name := range fs.Args() {
		if !slices.Contains(Binaries, name) {
			fmt.Fprintf(stderr, "envtest-fetch: %q is none of %s\n", name, strings.Join(Binaries, ", "))
			return 1
		}
	}
	switch {
	case o.Version == "" || o.EtcdVersion == "" || o.Dest == "":
		fmt.Fprintln(stderr, "envtest-fetch: -version, -etcd-version and -dest are required")
		return 1
	case o.CacheDir == "":
		fmt.Fprintf(stderr, "envtest-fetch: no cache directory (%v): pass -cache\n", cacheErr)
		return 1
	}
	o.Client = NewClient(*connect)
	ctx, cancel := context.WithTimeout(ctx, *total)
	defer cancel()
	missing, err := Fetch(ctx, o, fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "envtest: %v\n", err)
		return 1
	}
	// One line for each reason, naming the binaries it leaves to be built.
	var reasons []string
	names := map[string][]string{}
	for _, name := range fs.Args() {
		if err := missing[name]; err != nil {
			r := err.Error()
			if names[r] == nil {
				reasons = append(reasons, r)
			}
			names[r] = append(names[r], name)
		}
	}
	for _, r := range reasons {
		fmt.Fprintf(stderr, "envtest: building %s from source: %s\n", strings.Join(names[r], ", "), r)
	}
	return 0
}
