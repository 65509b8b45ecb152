package console

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// observerTypes reads the event type names internal/observer declares: every constant named
// Type… with a string value, so a new type cannot be added without the page hearing of it.
func observerTypes(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "observer", "*.go"))
	var out []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Type") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out = append(out, v)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// appTypes reads the keys of app.js's ACTIVITY table, one `  name: …` line each.
func appTypes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("static", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	start := strings.Index(src, "\nconst ACTIVITY = {\n")
	if start < 0 {
		t.Fatal("app.js has no `const ACTIVITY = {` table")
	}
	body := src[start:]
	end := strings.Index(body, "\n};\n")
	if end < 0 {
		t.Fatal("app.js: ACTIVITY table is not closed by a `};` line")
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z_]+):`).FindAllStringSubmatch(body[:end], -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out
}

func TestAppHandlesExactlyTheObserverTypes(t *testing.T) {
	goTypes, jsTypes := observerTypes(t), appTypes(t)
	if len(goTypes) < 10 {
		t.Fatalf("found only %d observer types (%v): the parser missed the declarations", len(goTypes), goTypes)
	}
	for _, ty := range goTypes {
		if !slices.Contains(jsTypes, ty) {
			t.Errorf("observer declares %q but app.js's ACTIVITY table does not handle it (add it, or map it to null to ignore it)", ty)
		}
	}
	for _, ty := range jsTypes {
		if !slices.Contains(goTypes, ty) {
			t.Errorf("app.js handles %q, which internal/observer does not declare", ty)
		}
	}
}

// constStrings reads the string constants named prefix… declared in the Go files of dir.
func constStrings(t *testing.T, dir, prefix string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var out []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, prefix) || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out = append(out, v)
					}
				}
			}
		}
	}
	return out
}

// appSystemRows reads the keys of app.js's SYSTEM_ROWS table.
func appSystemRows(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("static", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	start := strings.Index(src, "\nconst SYSTEM_ROWS = {\n")
	if start < 0 {
		t.Fatal("app.js has no `const SYSTEM_ROWS = {` table")
	}
	body := src[start:]
	end := strings.Index(body, "\n};\n")
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z_]+):`).FindAllStringSubmatch(body[:end], -1) {
		out = append(out, m[1])
	}
	return out
}

// Every row type the harness (Row… constants) or the relay ("type": literals in its rules)
// writes has a line in the page's SYSTEM_ROWS table, or it would vanish from the chat.
func TestAppRendersEverySystemRowTypeWeWrite(t *testing.T) {
	js := appSystemRows(t)
	want := constStrings(t, filepath.Join("..", "harness"), "Row")
	if len(want) < 7 {
		t.Fatalf("found only %d harness row types (%v)", len(want), want)
	}
	src, err := os.ReadFile(filepath.Join("..", "relay", "admin_rules.go"))
	if err != nil {
		t.Fatal(err)
	}
	// The relay's row types: "type": "x", typ := "x", typ = "x", append(events, "x") and the
	// archived/unarchived pair.
	re := regexp.MustCompile(`(?:"type": |typ :?= |append\(events, |true: |false: )"([a-z_]+)"`)
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		want = append(want, m[1])
	}
	for _, ty := range want {
		if !slices.Contains(js, ty) {
			t.Errorf("%q is written as a 40099 type but app.js's SYSTEM_ROWS does not render it", ty)
		}
	}
}
