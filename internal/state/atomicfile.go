package state

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data atomically and durably: a temporary
// file in the same folder, fsynced, renamed over path, the folder fsynced.
// A reader sees the old file or the new one, never a part; a crash leaves
// one of them. For the small files beside the state (pause marker, tokens,
// views); the state file itself goes through Store.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return WriteFileRenaming(path, data, perm, os.Rename)
}

// WriteFileRenaming is WriteFile with the rename step given (tests make it
// fail to prove that a failed write leaves the old file).
func WriteFileRenaming(path string, data []byte, perm fs.FileMode, rename func(oldpath, newpath string) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}
