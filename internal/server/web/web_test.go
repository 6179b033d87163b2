package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// The dashboard works offline and under Content-Security-Policy:
// default-src 'self': no address elsewhere, no inline script, and data
// reaches the page as text only.
func TestTheDashboardLoadsNothingFromElsewhere(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(FS, path)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(data), "http://www.w3.org/2000/svg", "")
		if m := external.FindString(text); m != "" {
			t.Errorf("%s names %q: the dashboard must load nothing from elsewhere", path, m)
		}
		if strings.HasSuffix(path, ".js") {
			for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
				if strings.Contains(text, bad) {
					t.Errorf("%s uses %s: data goes in as text only", path, bad)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestThePageNamesOnlyItsOwnFilesAndNoInlineScript(t *testing.T) {
	page, err := fs.ReadFile(FS, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(string(page), -1) {
		if !strings.Contains(m, `src="`) {
			t.Errorf("inline script %s: CSP refuses it", m)
		}
	}
	if regexp.MustCompile(`\son[a-z]+=`).Match(page) || strings.Contains(string(page), "style=") {
		t.Error("index.html has an inline handler or style")
	}
	refs := regexp.MustCompile(`(?:src|href)="/([^"#?]+)"`).FindAllStringSubmatch(string(page), -1)
	imports := regexp.MustCompile(`from '\./([^']+)'`)
	js, _ := fs.Glob(FS, "*.js")
	for _, f := range js {
		data, _ := fs.ReadFile(FS, f)
		refs = append(refs, imports.FindAllStringSubmatch(string(data), -1)...)
	}
	if len(refs) < 4 {
		t.Fatalf("found only %d references", len(refs))
	}
	for _, r := range refs {
		if _, err := fs.Stat(FS, r[1]); err != nil {
			t.Errorf("%s is named but not embedded", r[1])
		}
	}
}
