package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every file of this package is the decision kernel (the local run is
// package local): it touches no files, starts no goroutines and reads no wall
// clock: its clock is its Host's Now, and what touches the world goes
// through the Host. So the Temporal workflow can run it deterministically.
func TestKernelDecidesOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	wall := []string{"Now", "Since", "Until", "After", "AfterFunc", "Tick", "NewTicker", "NewTimer", "Sleep"}
	fset := token.NewFileSet()
	kernel := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		kernel++
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			switch p := strings.Trim(imp.Path.Value, `"`); p {
			case "os", "os/exec", "io/fs", "github.com/aot-loop/aot/internal/runlock":
				t.Errorf("%s imports %s: the kernel touches no files", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a go statement: the kernel starts no goroutines (the driver does)", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" && slices.Contains(wall, n.Sel.Name) {
					t.Errorf("%s: time.%s: the kernel's clock is its Host's Now", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
	if kernel < 10 {
		t.Fatalf("only %d kernel files found: run from the package's folder", kernel)
	}
}
