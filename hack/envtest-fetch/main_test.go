package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const testVersion = "1.36.3"

// entry is one member of a test tarball.
type entry struct {
	name     string
	typeflag byte
	body     string
	link     string
}

// fakeBinaries are the three binaries as small scripts: the fetch moves bytes, their content
// does not matter.
func fakeBinaries() []entry {
	var es []entry
	for _, b := range Binaries {
		es = append(es, entry{name: tarballDir + "/" + b, typeflag: tar.TypeReg, body: "#!/bin/sh\necho " + b + "\n"})
	}
	return es
}

// makeTarball gzips a tar of the entries, directories first as controller-tools' does.
func makeTarball(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: 0o755, Size: int64(len(e.body)), Linkname: e.link, ModTime: time.Unix(0, 0)}
		if e.typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
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

func sha512Hex(b []byte) string {
	s := sha512.Sum512(b)
	return hex.EncodeToString(s[:])
}

// indexServer serves an envtest-releases.yaml naming one tarball with the given hash, and the
// tarball's bytes, on loopback, counting requests.
type indexServer struct {
	*httptest.Server
	requests atomic.Int32
}

func serve(t testing.TB, tarball []byte, indexHash string) *indexServer {
	t.Helper()
	idx := &indexServer{}
	name := ArchiveName(testVersion, runtime.GOOS, runtime.GOARCH)
	mux := http.NewServeMux()
	mux.HandleFunc("/envtest-releases.yaml", func(w http.ResponseWriter, r *http.Request) {
		idx.requests.Add(1)
		// Another release and another platform beside it, as in the real index.
		fmt.Fprintf(w, "releases:\n  v1.36.2:\n    envtest-v1.36.2-%s-%s.tar.gz:\n      hash: %s\n      selfLink: http://%s/other.tar.gz\n",
			runtime.GOOS, runtime.GOARCH, strings.Repeat("0", 128), r.Host)
		fmt.Fprintf(w, "  v%s:\n    envtest-v%s-plan9-mips.tar.gz:\n      hash: %s\n      selfLink: http://%s/other.tar.gz\n",
			testVersion, testVersion, strings.Repeat("0", 128), r.Host)
		fmt.Fprintf(w, "    %s:\n      hash: %s\n      selfLink: http://%s/%s\n", name, indexHash, r.Host, name)
	})
	mux.HandleFunc("/"+name, func(w http.ResponseWriter, _ *http.Request) {
		idx.requests.Add(1)
		_, _ = w.Write(tarball)
	})
	idx.Server = httptest.NewServer(mux)
	t.Cleanup(idx.Close)
	return idx
}

// options fetch from url with a pin file of the test's own holding pin.
func options(t testing.TB, url, pin string) Options {
	t.Helper()
	dir := t.TempDir()
	pins := filepath.Join(dir, "pins")
	text := "# the test's own pins\n"
	if pin != "" {
		text += pin + "  " + ArchiveName(testVersion, runtime.GOOS, runtime.GOARCH) + "\n"
	}
	if err := os.WriteFile(pins, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return Options{
		Version:  testVersion,
		OS:       runtime.GOOS,
		Arch:     runtime.GOARCH,
		IndexURL: url + "/envtest-releases.yaml",
		PinFile:  pins,
		CacheDir: filepath.Join(dir, "cache"),
		Dest:     filepath.Join(dir, "bin", "k8s", testVersion),
		Client:   NewClient(2 * time.Second),
		Log:      &bytes.Buffer{},
	}
}

// assertEmpty fails when dir has anything in it: a refused download installs nothing.
func assertEmpty(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range entries {
			t.Errorf("%s: %s left behind", dir, e.Name())
		}
	}
}

func TestFetchInstallsThePinnedTarball(t *testing.T) {
	tarball := makeTarball(t, append([]entry{{name: "controller-tools/envtest/", typeflag: tar.TypeDir}}, fakeBinaries()...))
	srv := serve(t, tarball, sha512Hex(tarball))
	o := options(t, srv.URL, sha512Hex(tarball))

	if err := Fetch(context.Background(), o); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	for _, b := range Binaries {
		got, err := os.ReadFile(filepath.Join(o.Dest, b))
		if err != nil {
			t.Fatal(err)
		}
		if want := "#!/bin/sh\necho " + b + "\n"; string(got) != want {
			t.Errorf("%s = %q, want %q", b, got, want)
		}
		if fi, _ := os.Stat(filepath.Join(o.Dest, b)); fi.Mode()&0o100 == 0 {
			t.Errorf("%s is not executable: %v", b, fi.Mode())
		}
	}
	if log := o.Log.(*bytes.Buffer).String(); !strings.Contains(log, "envtest: downloaded "+ArchiveName(testVersion, runtime.GOOS, runtime.GOARCH)+" from "+srv.URL) {
		t.Errorf("log = %q, want it to say what was downloaded from where", log)
	}
	if n := srv.requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2 (the index and the tarball)", n)
	}

	// Another clone (another dest) uses the per-user cache: no request at all.
	srv.Close()
	o.Dest = filepath.Join(t.TempDir(), "k8s")
	o.Log = &bytes.Buffer{}
	if err := Fetch(context.Background(), o); err != nil {
		t.Fatalf("Fetch from the cache: %v", err)
	}
	if !hasAll(o.Dest) {
		t.Errorf("the second clone's %s lacks a binary", o.Dest)
	}
	if log := o.Log.(*bytes.Buffer).String(); !strings.Contains(log, "(cached)") {
		t.Errorf("log = %q, want it to say the cache was used", log)
	}
}

func TestFetchRefusesAHashOtherThanThePin(t *testing.T) {
	tarball := makeTarball(t, fakeBinaries())
	other := makeTarball(t, append(fakeBinaries()[:2], entry{name: tarballDir + "/kubectl", typeflag: tar.TypeReg, body: "tampered"}))
	for _, tc := range []struct {
		name                 string
		served, indexed, pin []byte
		want                 string
	}{
		// The index was changed along with the tarball: the pin catches it before the download.
		{"index differs from the pin", other, other, tarball, "not the pinned"},
		// The tarball was swapped under an unchanged index.
		{"tarball differs from the pin", other, tarball, tarball, "has the SHA-512 " + sha512Hex(other) + ", not the pinned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.served, sha512Hex(tc.indexed))
			o := options(t, srv.URL, sha512Hex(tc.pin))
			err := Fetch(context.Background(), o)
			if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "refusing") {
				t.Fatalf("Fetch = %v, want a refusal (not a fallback) containing %q", err, tc.want)
			}
			assertEmpty(t, o.Dest, o.CacheDir)
		})
	}
}

func TestFetchFallsBackWhenItCannotDownload(t *testing.T) {
	tarball := makeTarball(t, fakeBinaries())

	t.Run("index unreachable", func(t *testing.T) {
		// A port nothing listens on any more.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		o := options(t, "http://"+addr, sha512Hex(tarball))
		err = Fetch(context.Background(), o)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "index unreachable") {
			t.Fatalf("Fetch = %v, want an unreachable index (a fallback)", err)
		}
		assertEmpty(t, o.Dest, o.CacheDir)
	})

	t.Run("no pin", func(t *testing.T) {
		srv := serve(t, tarball, sha512Hex(tarball))
		o := options(t, srv.URL, "")
		err := Fetch(context.Background(), o)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no SHA-512 pinned for") {
			t.Fatalf("Fetch = %v, want no pin (a fallback)", err)
		}
		if n := srv.requests.Load(); n != 0 {
			t.Errorf("%d requests, want none: what is not pinned is never downloaded", n)
		}
		assertEmpty(t, o.Dest, o.CacheDir)
	})

	t.Run("no entry in the index", func(t *testing.T) {
		srv := serve(t, tarball, sha512Hex(tarball))
		o := options(t, srv.URL, sha512Hex(tarball))
		o.Version = "1.99.0"
		pins := sha512Hex(tarball) + "  " + ArchiveName(o.Version, o.OS, o.Arch) + "\n"
		if err := os.WriteFile(o.PinFile, []byte(pins), 0o600); err != nil {
			t.Fatal(err)
		}
		err := Fetch(context.Background(), o)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "has no envtest-v1.99.0") {
			t.Fatalf("Fetch = %v, want no entry (a fallback)", err)
		}
	})
}

func TestFetchRefusesAMalformedTarball(t *testing.T) {
	bins := fakeBinaries()
	// with is the three binaries and more, in a slice of its own.
	with := func(more ...entry) []entry { return append(fakeBinaries(), more...) }
	for _, tc := range []struct {
		name    string
		entries []entry
		want    string
	}{
		{"path traversal", with(entry{name: "controller-tools/envtest/../../../evil", typeflag: tar.TypeReg, body: "x"}), "unexpected entry"},
		{"traversal named as a binary", []entry{bins[0], bins[1], {name: "../controller-tools/envtest/kubectl", typeflag: tar.TypeReg, body: "x"}}, "unexpected entry"},
		{"absolute path", []entry{bins[0], bins[1], {name: "/controller-tools/envtest/kubectl", typeflag: tar.TypeReg, body: "x"}}, "unexpected entry"},
		{"extra file", with(entry{name: tarballDir + "/kube-controller-manager", typeflag: tar.TypeReg, body: "x"}), "unexpected entry"},
		{"symlink", []entry{bins[0], bins[1], {name: tarballDir + "/kubectl", typeflag: tar.TypeSymlink, link: "/bin/sh"}}, "unexpected entry"},
		{"binary twice", with(bins[2]), "twice"},
		{"binary missing", bins[:2], "has no controller-tools/envtest/kubectl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tarball := makeTarball(t, tc.entries)
			// Pinned: the layout check alone must refuse it.
			srv := serve(t, tarball, sha512Hex(tarball))
			o := options(t, srv.URL, sha512Hex(tarball))
			err := Fetch(context.Background(), o)
			if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch = %v, want a refusal containing %q", err, tc.want)
			}
			assertEmpty(t, o.Dest, o.CacheDir)
			if _, err := os.Stat(filepath.Join(filepath.Dir(o.PinFile), "evil")); err == nil {
				t.Error("the traversal wrote outside the cache")
			}
		})
	}
}

func TestRunExitStatus(t *testing.T) {
	// hack/envtest.sh builds from source on 2 and stops on anything else but 0.
	tarball := makeTarball(t, fakeBinaries())
	srv := serve(t, tarball, sha512Hex(tarball))
	for _, tc := range []struct {
		name     string
		pin      string
		wantCode int
		wantLog  string
	}{
		{"downloaded", sha512Hex(tarball), 0, "envtest: downloaded "},
		{"fallback", "", 2, "envtest: no SHA-512 pinned for " + ArchiveName(testVersion, runtime.GOOS, runtime.GOARCH) + " in "},
		{"refused", strings.Repeat("ab", 64), 1, "refusing it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, srv.URL, tc.pin)
			var stderr bytes.Buffer
			env := map[string]string{"ENVTEST_INDEX_URL": o.IndexURL}
			code := run(context.Background(), []string{"-version", testVersion, "-dest", o.Dest, "-pins", o.PinFile, "-cache", o.CacheDir}, func(k string) string { return env[k] }, &stderr)
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantLog) {
				t.Fatalf("run = %d, stderr %q; want %d and %q", code, stderr.String(), tc.wantCode, tc.wantLog)
			}
			if tc.wantCode == 2 && !strings.HasSuffix(strings.TrimSpace(stderr.String()), ", building from source") {
				t.Errorf("stderr = %q, want it to say it builds from source", stderr.String())
			}
		})
	}
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
		{"sha512sum output", h + "  envtest-v1.36.3-linux-amd64.tar.gz\n", map[string]string{"envtest-v1.36.3-linux-amd64.tar.gz": h}, ""},
		{"binary mode and upper case", strings.ToUpper(h) + " *a.tar.gz", map[string]string{"a.tar.gz": h}, ""},
		{"short hash", "abcd  a.tar.gz", nil, "not a SHA-512"},
		{"not hex", strings.Repeat("zz", 64) + "  a.tar.gz", nil, "not a SHA-512"},
		{"no name", h, nil, "line 1"},
		{"twice", h + "  a.tar.gz\n" + h + "  a.tar.gz", nil, "pinned twice"},
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

// The repository's pin file parses, and pins only tarball names the fetch would ask for.
func TestRepositoryPins(t *testing.T) {
	data, err := os.ReadFile("../envtest.sha512")
	if err != nil {
		t.Fatal(err)
	}
	pins, err := ParsePins(string(data))
	if err != nil {
		t.Fatalf("hack/envtest.sha512: %v", err)
	}
	for name := range pins {
		var v, goos, goarch string
		if _, err := fmt.Sscanf(strings.NewReplacer("-", " ").Replace(strings.TrimSuffix(name, ".tar.gz")), "envtest v%s %s %s", &v, &goos, &goarch); err != nil || ArchiveName(v, goos, goarch) != name {
			t.Errorf("hack/envtest.sha512 pins %q, not an envtest-v<version>-<os>-<arch>.tar.gz", name)
		}
	}
}
