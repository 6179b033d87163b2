//go:build unix

package cli

import (
	"fmt"
	"syscall"
)

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// mksock binds a Unix socket to path and closes it: the file stays.
func mksock(path string) error {
	if len(path) >= 104 {
		return fmt.Errorf("mksock: %s is too long for a socket address", path)
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return fmt.Errorf("mksock: %w", err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		return fmt.Errorf("mksock %s: %w", path, err)
	}
	return nil
}
