//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// devNull is the device number of /dev/null on Linux (major 1, minor 3).
const devNull = 1<<8 | 3

func mknodNull(path string) error {
	return syscall.Mknod(path, syscall.S_IFCHR|0o600, devNull)
}

var canMknod = sync.OnceValue(func() bool {
	dir, err := os.MkdirTemp("", "aot-mknod-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	return mknodNull(filepath.Join(dir, "null")) == nil
})
