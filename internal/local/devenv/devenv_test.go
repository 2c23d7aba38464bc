package devenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLoadServingCA(t *testing.T) {
	caPEM := testCAPEM(t)
	tests := []struct {
		name    string
		files   map[string]string
		want    []byte
		wantErr bool
	}{
		{name: "a first run", files: nil},
		{name: "reused as is", files: map[string]string{"apiserver.crt": "x", servingCAFile: string(caPEM)}, want: caPEM},
		{name: "the CA missing", files: map[string]string{"apiserver.crt": "x"}, wantErr: true},
		{name: "the certificate missing", files: map[string]string{servingCAFile: string(caPEM)}, wantErr: true},
		{name: "the CA garbled", files: map[string]string{"apiserver.crt": "x", servingCAFile: "garbage"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := loadServingCA(dir)
			if tt.wantErr {
				if !errors.Is(err, ErrBrokenState) {
					t.Fatalf("loadServingCA on a damaged cert dir = %v, want ErrBrokenState", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(tt.want) {
				t.Fatalf("loadServingCA = %q, want %q", got, tt.want)
			}
		})
	}
}

// testCAPEM is a self-signed CA certificate in PEM.
func testCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// A process started through the wrapper dies with its parent, even when the parent is killed
// and cannot stop it.
func TestParentDeathSignal(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed for the parent-death signal: %v", err)
	}
	wrapper, err := withParentDeathSignal(t.TempDir(), "/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	// The parent shell starts the wrapped sleep, says its pid, gives the wrapper time to set
	// the signal, and exits; the wrapped sleep would otherwise run for a minute. Its output
	// goes elsewhere, or reading the parent's would wait for it.
	out, err := exec.Command("/bin/sh", "-c", shellQuote(wrapper)+" 60 >/dev/null 2>&1 & echo $!; sleep 0.5").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("no pid from the parent: %q", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the wrapped process outlived its parent")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running reports whether pid is a process that is not a zombie.
func running(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func TestPrepareStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	unlock, err := prepareStateDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prepareStateDir(dir, false); err == nil || !strings.Contains(err.Error(), "another switchboard dev") {
		t.Fatalf("second run on a locked state dir = %v, want a clear error", err)
	}
	if _, err := prepareStateDir(dir, true); err == nil || !strings.Contains(err.Error(), "before --fresh") {
		t.Fatalf("--fresh on a locked state dir = %v, want a clear error", err)
	}
	unlock()
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	unlock, err = prepareStateDir(dir, true)
	if err != nil {
		t.Fatalf("--fresh: %v", err)
	}
	unlock()
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Fatalf("--fresh kept the old data (%v)", err)
	}

	// A state dir made by hand, open to every local user, is made private.
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err = prepareStateDir(open, false)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	info, err := os.Stat(open)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o700 {
		t.Fatalf("the state dir's mode after prepareStateDir = %v, want 0700", info.Mode().Perm())
	}

	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, fresh := range []bool{false, true} {
		if _, err := prepareStateDir(foreign, fresh); err == nil {
			t.Fatalf("prepareStateDir(fresh=%v) accepted a directory that is not a state dir", fresh)
		}
	}
	if _, err := os.Stat(filepath.Join(foreign, "precious")); err != nil {
		t.Fatalf("a foreign directory lost a file: %v", err)
	}
}

func TestCheckListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	err = checkListen("--listen", l.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("checkListen on a taken port = %v, want a message naming --listen", err)
	}
	if err := checkListen("--listen", "127.0.0.1:0"); err != nil {
		t.Fatalf("checkListen on a free port: %v", err)
	}
}

func TestCheckBinaries(t *testing.T) {
	err := checkBinaries(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make envtest") {
		t.Fatalf("checkBinaries on an empty dir = %v, want a message naming make envtest", err)
	}
}
