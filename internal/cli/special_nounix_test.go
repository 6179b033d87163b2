//go:build !unix

package cli

import "errors"

func mkfifo(path string) error { return errors.New("mkfifo: no FIFOs on this system") }

func mksock(path string) error { return errors.New("mksock: no Unix socket files in these tests") }
