package workspace

import "testing"

func TestOverlap(t *testing.T) {
	tests := []struct {
		a, b []string
		want bool
	}{
		{nil, []string{"src/a.go"}, true},
		{[]string{"src/a.go"}, []string{"src/a.go"}, true},
		{[]string{"src/a.go"}, []string{"src/b.go"}, false},
		{[]string{"src/**"}, []string{"src/deep/a.go"}, true},
		{[]string{"./src/**"}, []string{"src/a.go"}, true},
		{[]string{"src/**"}, []string{"src"}, true},
		{[]string{"src"}, []string{"src/a.go"}, false},
		{[]string{"**"}, []string{"anything/at/all"}, true},
		{[]string{"src/*.go"}, []string{"src/a.go"}, true},
		{[]string{"src/*.go"}, []string{"src/a.md"}, false},
		{[]string{"src/*.go"}, []string{"src/sub/a.go"}, false},
		{[]string{"src/**/*.go"}, []string{"src/sub/deep/a.go"}, true},
		{[]string{"**/*.md"}, []string{"docs/x/README.md"}, true},
		{[]string{"**/*.md"}, []string{"docs/x/main.go"}, false},
		{[]string{"src/**"}, []string{"lib/**"}, false},
		{[]string{"a*.go"}, []string{"*b.go"}, true},
		{[]string{"a*.go"}, []string{"b*.go"}, false},
		{[]string{"*.go"}, []string{"*.md"}, false},
		{[]string{"{src,lib}/a.go"}, []string{"lib/a.go"}, true},
		{[]string{"{src,lib}/a.go"}, []string{"cmd/a.go"}, false},
		{[]string{"{src/x,lib}/a.go"}, []string{"src/x/a.go"}, true},
		{[]string{"docs/a.md", "src/x.go"}, []string{"test/**", "src/**"}, true},
		{[]string{"docs/a.md", "src/x.go"}, []string{"test/**", "cmd/**"}, false},
		{[]string{"f[ab].txt"}, []string{"fb.txt"}, true},
		{[]string{"f[ab].txt"}, []string{"fc.txt"}, false},
	}
	for _, tt := range tests {
		if got := Overlap(tt.a, tt.b); got != tt.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := Overlap(tt.b, tt.a); got != tt.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v (symmetry)", tt.b, tt.a, got, tt.want)
		}
	}
}
