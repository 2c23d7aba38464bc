package proc

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a child's output and a reader (a test, a hygiene scan) may use
// at the same time: an Options.Output that keeps everything.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
