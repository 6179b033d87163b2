package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aot-loop/aot/internal/state"
)

// DefaultTokenFile is where aot serve keeps its access token.
func DefaultTokenFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no folder for the access token: %w (set --token-file)", err)
	}
	return filepath.Join(dir, "aot", "serve-token"), nil
}

// LoadToken returns the token kept in path, creating it (owner-only: the
// file 0600, its folder 0700) when it does not exist or renew is set. A
// token file that others may read is refused: anyone who reads it controls
// the loops.
func LoadToken(path string, renew bool) (string, error) {
	if !renew {
		fi, err := os.Stat(path)
		switch {
		case err == nil:
			if fi.Mode().Perm()&0o077 != 0 {
				return "", fmt.Errorf("token file %s: mode %04o lets others read it; chmod 600 it or start with --new-token", path, fi.Mode().Perm())
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("token file: %w", err)
			}
			if t := strings.TrimSpace(string(data)); len(t) >= 32 {
				return t, nil
			}
			return "", fmt.Errorf("token file %s: too short to be a token; start with --new-token", path)
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("token file: %w", err)
		}
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	t := hex.EncodeToString(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if err := state.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return t, nil
}
