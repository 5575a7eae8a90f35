package agentbox_test

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

// TestErrorCodesDeclaredOnce guards the one table of error codes (internal/api/codes.go): no
// other package declares a code constant (a name with "Code" in it) with one of its strings.
// A reason, a decision or a log word that happens to be spelled as a code is another
// vocabulary and may. Another package names a code
// through api's constant (or an alias of it), so that a code cannot drift between the daemon's
// API and a broker's answers.
func TestErrorCodesDeclaredOnce(t *testing.T) {
	fset := token.NewFileSet()
	table := filepath.Join("internal", "api", "codes.go")
	codes := map[string]string{} // value → constant in the table
	f, err := parser.ParseFile(fset, table, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	eachStringConst(f, func(name, value string) {
		if strings.HasPrefix(name, "Code") {
			codes[value] = name
		}
	})
	if len(codes) < 30 {
		t.Fatalf("%s declares %d codes: the table was not read", table, len(codes))
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == table {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		eachStringConst(f, func(name, value string) {
			if c, ok := codes[value]; ok && strings.Contains(strings.ToLower(name), "code") {
				t.Errorf("%s: %s = %q declares api.%s again: use the api constant", path, name, value, c)
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// eachStringConst calls fn for each top-level constant of f whose value is a string literal.
func eachStringConst(f *ast.File, fn func(name, value string)) {
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || i >= len(vs.Names) {
					continue
				}
				if s, err := strconv.Unquote(lit.Value); err == nil {
					fn(vs.Names[i].Name, s)
				}
			}
		}
	}
}
