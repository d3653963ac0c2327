package tomlfile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyDecodeMetaCallsTheLibrary keeps DecodeMeta the one way outside
// TOML reaches the TOML library: any other caller would skip the caps.
func TestOnlyDecodeMetaCallsTheLibrary(t *testing.T) {
	decoders := map[string]bool{"Decode": true, "DecodeFile": true, "DecodeFS": true, "DecodeReader": true,
		"NewDecoder": true, "Unmarshal": true}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		if filepath.Dir(path) == filepath.Join(root, "internal", "tomlfile") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		name := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/BurntSushi/toml" {
				name = "toml"
				if imp.Name != nil {
					name = imp.Name.Name
				}
			}
		}
		if name == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && decoders[sel.Sel.Name] {
					t.Errorf("%s: calls toml.%s; decode through tomlfile.DecodeMeta, which checks the caps first", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
