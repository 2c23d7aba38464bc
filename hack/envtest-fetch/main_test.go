package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testVersion     = "1.36.3"
	testEtcdVersion = "3.6.8"
	testOS          = "linux"
	testArch        = "amd64"
)

// entry is one member of a test archive.
type entry struct {
	name     string
	typeflag byte
	body     string
	link     string
}

// etcdDir is the directory of the test etcd archive, as etcd names it.
var etcdDir = fmt.Sprintf("etcd-v%s-%s-%s", testEtcdVersion, testOS, testArch)

// binary is a small script standing for a binary: the fetch moves bytes, their content does
// not matter.
func binary(name string) string { return "#!/bin/sh\necho " + name + "\n" }

// etcdEntries are what etcd's release archive holds: its directory, etcd and its tools, docs.
func etcdEntries() []entry {
	return []entry{
		{name: etcdDir + "/", typeflag: tar.TypeDir},
		{name: etcdDir + "/Documentation/README.md", typeflag: tar.TypeReg, body: "docs"},
		{name: etcdDir + "/etcd", typeflag: tar.TypeReg, body: binary("etcd")},
		{name: etcdDir + "/etcdctl", typeflag: tar.TypeReg, body: binary("etcdctl")},
		{name: etcdDir + "/etcdutl", typeflag: tar.TypeReg, body: binary("etcdutl")},
	}
}

// makeTarGz gzips a tar of the entries.
func makeTarGz(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: 0o755, Linkname: e.link, ModTime: time.Unix(0, 0)}
		if e.typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// makeZip zips the regular entries, as etcd's darwin archive is.
func makeZip(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		if e.typeflag != tar.TypeReg {
			continue
		}
		w, err := zw.Create(e.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha512Hex(b []byte) string {
	s := sha512.Sum512(b)
	return hex.EncodeToString(s[:])
}

// release is a loopback server of release artifacts by path, Kubernetes' under /k8s and
// etcd's under /etcd, counting the requests for each path.
type release struct {
	*httptest.Server
	files map[string][]byte
	// handlers answer a path in a way of their own (slowly, cut off, …).
	handlers map[string]http.HandlerFunc
	mu       sync.Mutex
	requests map[string]int
	// done is closed when the test ends, releasing handlers that hold their answer.
	done chan struct{}
}

func newRelease(t testing.TB) *release {
	t.Helper()
	r := &release{files: map[string][]byte{}, handlers: map[string]http.HandlerFunc{}, requests: map[string]int{}, done: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests[req.URL.Path]++
		body, ok := r.files[req.URL.Path]
		h := r.handlers[req.URL.Path]
		r.mu.Unlock()
		switch {
		case h != nil:
			h(w, req)
		case ok:
			_, _ = w.Write(body)
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(r.Close)
	t.Cleanup(func() { close(r.done) }) // first: the handlers return, then the server closes
	return r
}

// kubePath and etcdPath are where the test release serves each artifact.
func kubePath(name string) string {
	return fmt.Sprintf("/k8s/v%s/bin/%s/%s/%s", testVersion, testOS, testArch, name)
}

func etcdPath() string { return fmt.Sprintf("/etcd/v%s/%s.tar.gz", testEtcdVersion, etcdDir) }

// artifactPath is where the test release serves the named binary's artifact.
func artifactPath(name string) string {
	if name == "etcd" {
		return etcdPath()
	}
	return kubePath(name)
}

// serveAll serves every binary (etcd's release archive for etcd) and returns their pins.
func (r *release) serveAll(t testing.TB) map[string]string {
	pins := map[string]string{}
	for _, name := range Binaries {
		body := []byte(binary(name))
		if name == "etcd" {
			body = makeTarGz(t, etcdEntries())
		}
		r.files[artifactPath(name)] = body
		pins[name] = sha512Hex(body)
	}
	return pins
}

func (r *release) requestsFor(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[path]
}

// paths is how many paths were asked for.
func (r *release) paths() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

// options fetch from url with a pin file holding pins (by binary name, for the test's
// versions and platform).
func options(t testing.TB, url string, pins map[string]string) Options {
	t.Helper()
	dir := t.TempDir()
	text := "# the test's own pins\n"
	for _, name := range Binaries {
		if pin, ok := pins[name]; ok {
			version := testVersion
			if name == "etcd" {
				version = testEtcdVersion
			}
			text += PinKey(version, testOS, testArch, name) + " " + pin + "\n"
		}
	}
	pinFile := filepath.Join(dir, "envtest.sha512")
	if err := os.WriteFile(pinFile, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return Options{
		Version:       testVersion,
		EtcdVersion:   testEtcdVersion,
		OS:            testOS,
		Arch:          testArch,
		KubernetesURL: url + "/k8s",
		EtcdURL:       url + "/etcd/",
		PinFile:       pinFile,
		CacheDir:      filepath.Join(dir, "cache"),
		Dest:          filepath.Join(dir, "bin", "k8s", testVersion),
		Client:        NewClient(2 * time.Second),
		StallTimeout:  time.Minute,
		Log:           &bytes.Buffer{},
	}
}

// names lists a directory, or nothing when it does not exist.
func names(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	return got
}

// missingNames are the names of what Fetch left to be built, sorted.
func missingNames(missing map[string]error) []string {
	return slices.Sorted(maps.Keys(missing))
}

// assertInstalled checks that dest holds each named binary, whole and executable.
func assertInstalled(t *testing.T, dest string, want ...string) {
	t.Helper()
	for _, name := range want {
		got, err := os.ReadFile(filepath.Join(dest, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if string(got) != binary(name) {
			t.Errorf("%s = %q, want %q", name, got, binary(name))
		}
		if fi, _ := os.Stat(filepath.Join(dest, name)); fi.Mode().Perm()&0o111 != 0o111 {
			t.Errorf("%s is not executable: %v", name, fi.Mode())
		}
	}
	if got := names(t, dest); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s holds %v, want exactly %v", dest, got, want)
	}
}

func TestFetchInstallsThePinnedArtifacts(t *testing.T) {
	rel := newRelease(t)
	o := options(t, rel.URL, rel.serveAll(t))

	missing, err := Fetch(context.Background(), o, Binaries)
	if err != nil || len(missing) != 0 {
		t.Fatalf("Fetch = %v, %v; want every binary", missing, err)
	}
	assertInstalled(t, o.Dest, Binaries...)
	log := o.Log.(*bytes.Buffer).String()
	for _, name := range Binaries {
		if n := rel.requestsFor(artifactPath(name)); n != 1 {
			t.Errorf("%s: %d requests, want 1", artifactPath(name), n)
		}
		if want := "envtest: downloaded " + name + " from " + rel.URL + artifactPath(name) + " (SHA-512 as pinned)\n"; !strings.Contains(log, want) {
			t.Errorf("log = %q, want %q", log, want)
		}
	}
	// Only etcd is taken from its archive; nothing is left of the downloads.
	if got := names(t, o.CacheDir); len(got) != len(Binaries) || slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, ".") }) {
		t.Errorf("the cache holds %v, want one binary each", got)
	}

	// Another clone (another dest) takes them from the per-user cache: no request at all.
	rel.Close()
	o.Dest = filepath.Join(t.TempDir(), "k8s")
	o.Log = &bytes.Buffer{}
	if missing, err := Fetch(context.Background(), o, Binaries[:3]); err != nil || len(missing) != 0 {
		t.Fatalf("Fetch from the cache = %v, %v", missing, err)
	}
	assertInstalled(t, o.Dest, Binaries[:3]...)
	if log := o.Log.(*bytes.Buffer).String(); strings.Count(log, "from the cache, "+o.CacheDir) != 3 {
		t.Errorf("log = %q, want each of the three from the cache", log)
	}
}

func TestFetchTakesEtcdFromItsDarwinZip(t *testing.T) {
	rel := newRelease(t)
	dir := fmt.Sprintf("etcd-v%s-darwin-arm64", testEtcdVersion)
	archive := makeZip(t, []entry{
		{name: dir + "/etcdctl", typeflag: tar.TypeReg, body: binary("etcdctl")},
		{name: dir + "/etcd", typeflag: tar.TypeReg, body: binary("etcd")},
	})
	rel.files["/etcd/v"+testEtcdVersion+"/"+dir+".zip"] = archive
	o := options(t, rel.URL, nil)
	o.OS, o.Arch = "darwin", "arm64"
	if err := os.WriteFile(o.PinFile, []byte(PinKey(testEtcdVersion, "darwin", "arm64", "etcd")+" "+sha512Hex(archive)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if missing, err := Fetch(context.Background(), o, []string{"etcd"}); err != nil || len(missing) != 0 {
		t.Fatalf("Fetch = %v, %v", missing, err)
	}
	assertInstalled(t, o.Dest, "etcd")
}

// A binary is in place, in the cache and in dest, only once it is whole and checked: never
// while it is being downloaded.
func TestFetchPutsNothingInPlaceUntilWholeAndChecked(t *testing.T) {
	rel := newRelease(t)
	pins := rel.serveAll(t)
	body := rel.files[kubePath("kube-apiserver")]
	halfSent, resume := make(chan struct{}), make(chan struct{})
	rel.handlers[kubePath("kube-apiserver")] = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		close(halfSent)
		<-resume
		_, _ = w.Write(body[len(body)/2:])
	}
	o := options(t, rel.URL, pins)
	type result struct {
		missing map[string]error
		err     error
	}
	done := make(chan result, 1)
	go func() {
		missing, err := Fetch(context.Background(), o, []string{"kube-apiserver"})
		done <- result{missing, err}
	}()
	<-halfSent
	// The client has the first half, or is about to: give it every chance to misplace it.
	time.Sleep(100 * time.Millisecond)
	if got := names(t, o.Dest); len(got) != 0 {
		t.Errorf("halfway, dest holds %v", got)
	}
	if got := names(t, o.CacheDir); len(got) != 1 || !strings.HasPrefix(got[0], ".download-") {
		t.Errorf("halfway, the cache holds %v, want only the download's own directory", got)
	}
	close(resume)
	r := <-done
	if r.err != nil || len(r.missing) != 0 {
		t.Fatalf("Fetch = %v, %v", r.missing, r.err)
	}
	assertInstalled(t, o.Dest, "kube-apiserver")
}

func TestFetchRefusesWhatDiffersFromThePin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		binary string
		// served replaces the artifact, pinned (true) or not.
		served []byte
		pinned bool
		want   string
	}{
		{"a binary tampered with", "kube-apiserver", []byte(binary("evil")), false, "its SHA-512 is " + sha512Hex([]byte(binary("evil"))) + ", not the "},
		{"an archive tampered with", "etcd", makeTarGz(t, append(etcdEntries()[:2], entry{name: etcdDir + "/etcd", typeflag: tar.TypeReg, body: "evil"})), false, ", not the "},
		// Pinned by mistake: nothing else of it is taken.
		{"an archive without etcd", "etcd", makeTarGz(t, []entry{{name: etcdDir + "/etcdctl", typeflag: tar.TypeReg, body: "x"}}), true, "the archive has no " + etcdDir + "/etcd"},
		{"an archive whose etcd is a link", "etcd", makeTarGz(t, []entry{{name: etcdDir + "/etcd", typeflag: tar.TypeSymlink, link: "/bin/sh"}}), true, "the archive has no " + etcdDir + "/etcd"},
		{"an archive that is no archive", "etcd", []byte(binary("etcd")), true, "not a gzip file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel := newRelease(t)
			pins := rel.serveAll(t)
			rel.files[artifactPath(tc.binary)] = tc.served
			if tc.pinned {
				pins[tc.binary] = sha512Hex(tc.served)
			}
			o := options(t, rel.URL, pins)
			missing, err := Fetch(context.Background(), o, []string{tc.binary, "kubectl"})
			if err != nil {
				t.Fatal(err)
			}
			if err := missing[tc.binary]; len(missing) != 1 || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch left %v, want %s refused with %q", missing, tc.binary, tc.want)
			}
			// Nothing of it is kept, and the next binary is still fetched.
			assertInstalled(t, o.Dest, "kubectl")
			if got := names(t, o.CacheDir); !slices.Equal(got, []string{"kubectl-v1.36.3-linux-amd64"}) {
				t.Errorf("the cache holds %v, want only kubectl", got)
			}
		})
	}
}

func TestFetchNeverDownloadsWithoutAPin(t *testing.T) {
	rel := newRelease(t)
	pins := rel.serveAll(t)
	o := options(t, rel.URL, map[string]string{"kubectl": pins["kubectl"]})
	// Pins of another version and another platform pin nothing here.
	other := PinKey("1.36.2", testOS, testArch, "kube-apiserver") + " " + pins["kube-apiserver"] + "\n" +
		PinKey(testVersion, "linux", "arm64", "kube-apiserver") + " " + pins["kube-apiserver"] + "\n" +
		PinKey(testVersion, testOS, testArch, "etcd") + " " + pins["etcd"] + "\n"
	f, err := os.OpenFile(o.PinFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(other); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	missing, err := Fetch(context.Background(), o, []string{"etcd", "kube-apiserver", "kubectl"})
	if err != nil {
		t.Fatal(err)
	}
	if got := missingNames(missing); !slices.Equal(got, []string{"etcd", "kube-apiserver"}) {
		t.Fatalf("Fetch left %v, want etcd and kube-apiserver", missing)
	}
	for name, err := range missing {
		if want := "no SHA-512 pinned for linux/amd64 in " + o.PinFile; !errors.Is(err, ErrNoPin) || err.Error() != want {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
		if n := rel.requestsFor(artifactPath(name)); n != 0 {
			t.Errorf("%s: %d requests, want none: what is not pinned is never downloaded", name, n)
		}
	}
	assertInstalled(t, o.Dest, "kubectl")
}

// holdUntilGone answers with part of body, then holds the connection until the client or
// the test gives up.
func holdUntilGone(rel *release, part []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write(part)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-rel.done:
		}
	}
}

func TestFetchGivesUpOnAHostThatIsDownOrSlow(t *testing.T) {
	// silentListener accepts connections and never answers, counting them.
	silentListener := func(t *testing.T, accepted *atomic.Int32) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		var mu sync.Mutex
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			_ = l.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				_ = c.Close()
			}
		})
		return "http://" + l.Addr().String()
	}
	for _, tc := range []struct {
		name string
		// setup returns the URL to fetch from, and how many connections or requests the
		// host saw in the end.
		setup func(t *testing.T) (string, func() int)
		want  string
	}{
		{"refuses connections", func(t *testing.T) (string, func() int) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			_ = l.Close() // nothing listens on its port any more
			return "http://" + l.Addr().String(), func() int { return 1 }
		}, "connection refused"},
		{"accepts and never answers", func(t *testing.T) (string, func() int) {
			var accepted atomic.Int32
			url := silentListener(t, &accepted)
			return url, func() int { return int(accepted.Load()) }
		}, "unreachable: nothing received for 300ms"},
		{"stalls in the body", func(t *testing.T) (string, func() int) {
			rel := newRelease(t)
			rel.serveAll(t)
			for _, name := range Binaries {
				rel.handlers[artifactPath(name)] = holdUntilGone(rel, []byte("#!/bin/sh\n"))
			}
			return rel.URL, rel.paths
		}, "unreachable: nothing received for 300ms"},
		{"cuts the body off", func(t *testing.T) (string, func() int) {
			rel := newRelease(t)
			rel.serveAll(t)
			for _, name := range Binaries {
				rel.handlers[artifactPath(name)] = func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Length", "1000")
					_, _ = w.Write([]byte("#!/bin/sh\n"))
					w.(http.Flusher).Flush()
					conn, _, _ := w.(http.Hijacker).Hijack()
					_ = conn.Close()
				}
			}
			return rel.URL, rel.paths
		}, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, seen := tc.setup(t)
			o := options(t, url, newRelease(t).serveAll(t))
			o.StallTimeout = 300 * time.Millisecond
			// Bounded: a host that hung Fetch would be cut off by this deadline, and its error
			// would say so instead of the stall.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			missing, err := Fetch(ctx, o, Binaries[:3])
			if err != nil {
				t.Fatal(err)
			}
			if got := missingNames(missing); !slices.Equal(got, Binaries[:3]) {
				t.Fatalf("Fetch left %v, want the three", missing)
			}
			for name, err := range missing {
				if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), tc.want) || err.Error() != missing["etcd"].Error() {
					t.Errorf("%s: %v, want the host's one error, unreachable with %q", name, err, tc.want)
				}
			}
			// The host is tried once: the rest is not waited for again.
			if n := seen(); n != 1 {
				t.Errorf("the host saw %d connections or requests, want 1", n)
			}
			assertInstalled(t, o.Dest)
			if got := names(t, o.CacheDir); len(got) != 0 {
				t.Errorf("the cache holds %v", got)
			}
		})
	}
}

// Only silence stalls: a download that keeps arriving, however slowly, is waited for past
// the stall timeout.
func TestFetchWaitsForASlowButSteadyHost(t *testing.T) {
	rel := newRelease(t)
	pins := rel.serveAll(t)
	body := rel.files[kubePath("kubectl")]
	rel.handlers[kubePath("kubectl")] = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		for i := range body {
			_, _ = w.Write(body[i : i+1])
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}
	o := options(t, rel.URL, pins)
	o.StallTimeout = 2 * time.Second // a tenth of the whole download's time
	if missing, err := Fetch(context.Background(), o, []string{"kubectl"}); err != nil || len(missing) != 0 {
		t.Fatalf("Fetch = %v, %v", missing, err)
	}
	assertInstalled(t, o.Dest, "kubectl")
}

func TestFetchTriesTheNextBinaryAfterANotFound(t *testing.T) {
	rel := newRelease(t)
	o := options(t, rel.URL, rel.serveAll(t))
	delete(rel.files, kubePath("kube-apiserver"))
	missing, err := Fetch(context.Background(), o, []string{"kube-apiserver", "kubectl"})
	if err != nil {
		t.Fatal(err)
	}
	if err, want := missing["kube-apiserver"], rel.URL+kubePath("kube-apiserver")+" unreachable: 404 Not Found"; len(missing) != 1 || !errors.Is(err, ErrUnreachable) || err.Error() != want {
		t.Fatalf("Fetch left %v, want kube-apiserver: %s", missing, want)
	}
	assertInstalled(t, o.Dest, "kubectl")
}

func TestRun(t *testing.T) {
	rel := newRelease(t)
	pins := rel.serveAll(t)
	// A host that trickles a byte at a time never stalls: -timeout bounds it.
	rel.handlers[kubePath("kubelet")] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		for {
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-rel.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	for _, tc := range []struct {
		name     string
		pins     map[string]string
		args     []string
		wantCode int
		// wantLines are stderr's lines, %s standing for the pin file.
		wantLines []string
	}{
		{"downloaded", pins, []string{"etcd", "kubectl"}, 0, []string{
			"envtest: downloaded etcd from " + rel.URL + etcdPath() + " (SHA-512 as pinned)",
			"envtest: downloaded kubectl from " + rel.URL + kubePath("kubectl") + " (SHA-512 as pinned)",
		}},
		{"no pins, one line", nil, Binaries[:3], 0, []string{
			"envtest: building etcd, kube-apiserver, kubectl from source: no SHA-512 pinned for linux/amd64 in %s",
		}},
		{"tampered", map[string]string{"kubectl": pins["etcd"]}, []string{"kubectl"}, 0, []string{
			"envtest: building kubectl from source: refused " + rel.URL + kubePath("kubectl") + ": its SHA-512 is " + pins["kubectl"] + ", not the " + pins["etcd"] + " pinned in %s",
		}},
		{"trickled past -timeout", pins, []string{"-timeout", "1s", "kubelet"}, 0, []string{
			"envtest: building kubelet from source: " + strings.TrimPrefix(rel.URL, "http://") + " unreachable: context deadline exceeded",
		}},
		{"no such binary", pins, []string{"kube-evil"}, 1, []string{
			`envtest-fetch: "kube-evil" is none of etcd, kube-apiserver, kubectl, kube-controller-manager, kube-scheduler, kubelet, kube-proxy`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, rel.URL, tc.pins)
			env := map[string]string{"ENVTEST_KUBERNETES_URL": o.KubernetesURL, "ENVTEST_ETCD_URL": o.EtcdURL}
			args := append([]string{"-version", testVersion, "-etcd-version", testEtcdVersion, "-dest", o.Dest, "-pins", o.PinFile, "-cache", o.CacheDir}, tc.args...)
			var stderr bytes.Buffer
			code := run(context.Background(), args, func(k string) string { return env[k] }, &stderr)
			want := strings.ReplaceAll(strings.Join(tc.wantLines, "\n")+"\n", "%s", o.PinFile)
			if code != tc.wantCode || stderr.String() != want {
				t.Fatalf("run = %d, stderr:\n%s\nwant %d, stderr:\n%s", code, stderr.String(), tc.wantCode, want)
			}
		})
	}

	t.Run("bad pins", func(t *testing.T) {
		o := options(t, rel.URL, nil)
		if err := os.WriteFile(o.PinFile, []byte("1.36.3 linux/amd64 kubectl abcd\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"-version", testVersion, "-etcd-version", testEtcdVersion, "-dest", o.Dest, "-pins", o.PinFile, "-cache", o.CacheDir, "kubectl"}, func(string) string { return "" }, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), o.PinFile+`: line 1: "abcd" is not a SHA-512 in hex`) {
			t.Fatalf("run = %d, stderr %q; want 1 and the line at fault", code, stderr.String())
		}
	})
}

func TestParsePins(t *testing.T) {
	h := strings.Repeat("ab", 64)
	for _, tc := range []struct {
		name, text string
		want       map[string]string
		wantErr    string
	}{
		{"empty", "", map[string]string{}, ""},
		{"comments and blanks", "# c\n\n  # d\n", map[string]string{}, ""},
		{"a line", "1.36.3 linux/amd64 kube-apiserver " + h + "\n", map[string]string{"1.36.3 linux/amd64 kube-apiserver": h}, ""},
		{"etcd's and upper case", "3.6.8\tdarwin/arm64  etcd " + strings.ToUpper(h), map[string]string{"3.6.8 darwin/arm64 etcd": h}, ""},
		{"three fields", "1.36.3 linux/amd64 " + h, nil, "line 1: want"},
		{"a v", "v1.36.3 linux/amd64 kubectl " + h, nil, `"v1.36.3" is not a version`},
		{"no arch", "1.36.3 linux kubectl " + h, nil, `"linux" is not <os>/<arch>`},
		{"two slashes", "1.36.3 linux/amd64/v2 kubectl " + h, nil, "is not <os>/<arch>"},
		{"unknown binary", "1.36.3 linux/amd64 ../kubectl " + h, nil, `"../kubectl" is none of`},
		{"short hash", "1.36.3 linux/amd64 kubectl abcd", nil, "not a SHA-512"},
		{"not hex", "1.36.3 linux/amd64 kubectl " + strings.Repeat("zz", 64), nil, "not a SHA-512"},
		{"twice", "# x\n1.36.3 linux/amd64 kubectl " + h + "\n1.36.3 linux/amd64 kubectl " + h, nil, "line 3: 1.36.3 linux/amd64 kubectl is pinned twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePins(tc.text)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParsePins = %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("ParsePins = %v, want %v", got, tc.want)
			}
		})
	}
}

// The repository's pin file parses, and pins only the versions hack/envtest.sh fetches.
func TestRepositoryPins(t *testing.T) {
	data, err := os.ReadFile("../envtest.sha512")
	if err != nil {
		t.Fatal(err)
	}
	pins, err := ParsePins(string(data))
	if err != nil {
		t.Fatalf("hack/envtest.sha512: %v", err)
	}
	kube, err := os.ReadFile("../kube-version")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../tools/envtest/etcd/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^(?:require)?\s*go\.etcd\.io/etcd/server/v3 v(\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("hack/tools/envtest/etcd/go.mod requires no go.etcd.io/etcd/server/v3")
	}
	for key := range pins {
		f := strings.Fields(key)
		want, of := strings.TrimSpace(string(kube)), "hack/kube-version"
		if f[2] == "etcd" {
			want, of = string(m[1]), "the etcd hack/tools/envtest/etcd builds"
		}
		if f[0] != want {
			t.Errorf("hack/envtest.sha512 pins %q, not of version %s (%s)", key, want, of)
		}
	}
}
