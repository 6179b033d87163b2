//go:build !linux

package cli

import "errors"

func mknodNull(path string) error { return errors.New("mknod: only made on Linux in these tests") }

func canMknod() bool { return false }
