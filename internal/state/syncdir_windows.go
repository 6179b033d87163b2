//go:build windows

package state

// syncDir is a no-op on Windows, where directories cannot be fsync'd and
// MoveFileEx with replace is already durable enough for NTFS metadata.
func syncDir(dir string) error { return nil }
