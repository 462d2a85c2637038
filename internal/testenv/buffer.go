package testenv

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer collects what a logger or a child process writes while the test
// reads it: a bytes.Buffer behind a mutex. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

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

// Lines returns the lines written so far (the last one without its
// newline).
func (b *Buffer) Lines() []string {
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}
