package verify

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fileTree makes a small project: a build output with a hidden map file, an
// empty directory and a name holding glob characters.
func fileTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"dist/bundle.js":         "ok",
		"dist/.hidden.map":       "",
		"dist/sub/deep/a.map":    strings.Repeat("x", 1536),
		"lit[1].txt":             "",
		"src/.config/settings.x": "",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestFile(t *testing.T) {
	dir := fileTree(t)
	tests := []struct {
		pattern       string
		expectMissing bool
		want          FileResult
	}{
		{"dist/bundle.js", false, FileResult{Passed: true, Exists: true, Evidence: "File exists (2B): dist/bundle.js"}},
		{"dist/sub/deep/a.map", false, FileResult{Passed: true, Exists: true, Evidence: "File exists (1.5KB): dist/sub/deep/a.map"}},
		{"dist/bundle.js", true, FileResult{Exists: true, Evidence: "File exists (2B) (expected missing): dist/bundle.js"}},
		{"missing.txt", false, FileResult{Evidence: "Path not found: missing.txt"}},
		{"missing.txt", true, FileResult{Passed: true, Evidence: "Path does not exist (as expected): missing.txt"}},
		{"dist", false, FileResult{Passed: true, Exists: true, Evidence: "Directory exists with 3 files: dist"}},
		{"empty", false, FileResult{Passed: true, Exists: true, Evidence: "Directory exists with 0 files: empty"}},
		{"empty", true, FileResult{Exists: true, Evidence: "Directory exists with 0 files (expected missing): empty"}},
		{"dist/**/*.map", false, FileResult{Passed: true, Exists: true, Evidence: "2 files match pattern: dist/**/*.map",
			Matches: []string{"dist/.hidden.map", "dist/sub/deep/a.map"}}},
		// Dotfiles match like any other name: a stray hidden map file fails the check.
		{"dist/*.map", true, FileResult{Exists: true, Evidence: "1 files match pattern (expected none): dist/*.map",
			Matches: []string{"dist/.hidden.map"}}},
		{"**/settings.*", false, FileResult{Passed: true, Exists: true, Evidence: "1 files match pattern: **/settings.*",
			Matches: []string{"src/.config/settings.x"}}},
		{"dist/**/*.css", true, FileResult{Passed: true, Evidence: "No files match pattern (as expected): dist/**/*.css"}},
		{"nodir/**/*.css", false, FileResult{Evidence: "No files match pattern: nodir/**/*.css"}},
		{"dist/[b]undle.js", false, FileResult{Passed: true, Exists: true, Evidence: "1 files match pattern: dist/[b]undle.js",
			Matches: []string{"dist/bundle.js"}}},
		{"dist/{bundle,main}.js", false, FileResult{Passed: true, Exists: true, Evidence: "1 files match pattern: dist/{bundle,main}.js",
			Matches: []string{"dist/bundle.js"}}},
		{"lit[1].txt", false, FileResult{Passed: true, Exists: true, Evidence: "File exists (0B): lit[1].txt"}},
		{"", false, FileResult{Evidence: "No path given: an empty path verifies nothing"}},
		{"", true, FileResult{Evidence: "No path given: an empty path verifies nothing"}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			want := tt.want
			want.Path, want.Type = tt.pattern, "file"
			if tt.expectMissing {
				want.Type = "not_file"
			}
			for i, m := range want.Matches {
				want.Matches[i] = filepath.FromSlash(m)
			}
			if diff := cmp.Diff(want, File(dir, tt.pattern, tt.expectMissing)); diff != "" {
				t.Errorf("File(%q, %v) (-want +got):\n%s", tt.pattern, tt.expectMissing, diff)
			}
		})
	}
}

func TestFileAbsolute(t *testing.T) {
	dir := fileTree(t)
	abs := filepath.Join(dir, "dist", "bundle.js")
	if got := File(t.TempDir(), abs, false); !got.Passed {
		t.Fatalf("%+v", got)
	}
	glob := filepath.Join(dir, "dist", "**", "*.map")
	got := File(t.TempDir(), glob, false)
	if !got.Passed || len(got.Matches) != 2 || !filepath.IsAbs(got.Matches[0]) {
		t.Fatalf("%+v", got)
	}
}

func TestFileBrokenSymlinkIsNeitherPresentNorAbsent(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, expectMissing := range []bool{false, true} {
		if got := File(dir, "link", expectMissing); got.Passed || !strings.Contains(got.Evidence, "broken symbolic link") {
			t.Errorf("expectMissing %v: %+v", expectMissing, got)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1.0KB", 1536: "1.5KB", 1 << 20: "1.0MB", 5 << 20: "5.0MB"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
