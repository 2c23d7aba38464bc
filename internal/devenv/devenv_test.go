package devenv

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPKIEnsure(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(p pki) error
		wantErr bool
	}{
		{name: "reused as is", damage: func(pki) error { return nil }},
		{name: "a file missing", damage: func(p pki) error { return os.Remove(p.saPub()) }, wantErr: true},
		{name: "a file garbled", damage: func(p pki) error { return os.WriteFile(p.adminCert(), []byte("garbage"), 0o600) }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pki{dir: filepath.Join(t.TempDir(), "pki")}
			if err := p.ensure(); err != nil {
				t.Fatalf("generating: %v", err)
			}
			before, err := os.ReadFile(p.caCert())
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.damage(p); err != nil {
				t.Fatal(err)
			}
			err = p.ensure()
			if tt.wantErr {
				if !errors.Is(err, ErrBrokenState) {
					t.Fatalf("ensure on a damaged PKI = %v, want ErrBrokenState", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ensure on an intact PKI: %v", err)
			}
			after, _ := os.ReadFile(p.caCert())
			if string(before) != string(after) {
				t.Fatal("ensure regenerated an intact PKI; an exported kubeconfig would stop working")
			}
		})
	}
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
