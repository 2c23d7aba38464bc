package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Redis password comes from the file the configuration names, else from the environment;
// a named file that cannot be read stops the server with the field's name.
func TestRedisPassword(t *testing.T) {
	t.Setenv(RedisPasswordEnv, "from-env")
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ file, want, wantErr string }{
		{file: "", want: "from-env"},
		{file: file, want: "from-file"},
		{file: filepath.Join(t.TempDir(), "missing"), wantErr: "rateLimitRedis.passwordFile"},
	} {
		got, err := redisPassword(tt.file)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("redisPassword(%q) = %q, %v; want %q, %q", tt.file, got, err, tt.want, tt.wantErr)
		}
	}
}
