package tomlfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// nested builds, in each way TOML nests, documents whose deepest value is
// depth levels down; line is the line that value is on.
var nested = []struct {
	name string
	doc  func(depth int) string
	line int
}{
	{"arrays", func(d int) string { return "a = " + strings.Repeat("[", d-1) + "1" + strings.Repeat("]", d-1) + "\n" }, 1},
	{"inline tables", func(d int) string { return strings.Repeat("a = {", d-1) + "a = 1" + strings.Repeat("}", d-1) + "\n" }, 1},
	{"dotted key", func(d int) string { return strings.Repeat("a.", d-1) + "a = 1\n" }, 1},
	{"table header", func(d int) string { return "[" + strings.Repeat("a.", d-2) + "a]\nb = 1\n" }, 2},
	{"array of tables", func(d int) string { return "[[" + strings.Repeat("a.", d-3) + "a]]\nb = 1\n" }, 2},
	{"quoted header", func(d int) string {
		return "# [[[[\nx = \"]]] \\\" [[\"\ny = '''\n[[[\n'''\n[" + strings.Repeat(`"a.b".`, d-2) + "'c']\nb = 1\n"
	}, 7},
	{"mixed", func(d int) string {
		// [t.u] is 2 deep, v.w 2 more, the inline table's x.y 2 more,
		// the arrays the rest.
		n := d - 6
		return "[t.u]\nv.w = { x.y = " + strings.Repeat("[", n) + "1" + strings.Repeat("]", n) + " }\n"
	}, 2},
	{"arrays of inline tables", func(d int) string {
		if d%2 == 1 {
			n := (d - 1) / 2
			return "a = " + strings.Repeat("[{a = ", n) + "1" + strings.Repeat("}]", n) + "\n"
		}
		n := (d - 2) / 2
		return "a = " + strings.Repeat("[{a = ", n) + "[1]" + strings.Repeat("}]", n) + "\n"
	}, 1},
	{"multi-line array", func(d int) string {
		return "a = [\n  1,\n  " + strings.Repeat("[", d-2) + "2" + strings.Repeat("]", d-2) + ",\n]\n"
	}, 3},
}

// treeDepth is how deep the library nests v below level d.
func treeDepth(v any, d int) int {
	deepest := d
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			deepest = max(deepest, treeDepth(c, d+1))
		}
	case []map[string]any:
		for _, c := range v {
			deepest = max(deepest, treeDepth(c, d+1))
		}
	case []any:
		for _, c := range v {
			deepest = max(deepest, treeDepth(c, d+1))
		}
	}
	return deepest
}

// TestDepthCapBoundary: a document nested exactly MaxDepth deep is
// decoded, one level more is refused, naming the line and the cap.
func TestDepthCapBoundary(t *testing.T) {
	for _, c := range nested {
		t.Run(c.name, func(t *testing.T) {
			var tree map[string]any
			ok := c.doc(MaxDepth)
			if _, err := DecodeMeta(context.Background(), []byte(ok), &tree); err != nil {
				t.Fatalf("%d deep: %v\n%s", MaxDepth, err, ok)
			}
			if got := treeDepth(tree, 0); got != MaxDepth {
				t.Fatalf("the document meant to be %d deep is %d deep:\n%s", MaxDepth, got, ok)
			}
			_, err := DecodeMeta(context.Background(), []byte(c.doc(MaxDepth+1)), &tree)
			want := "x.toml:" + strconv.Itoa(c.line) + ": nesting deeper than 64 levels (the cap on TOML nesting)"
			var ce *CapError
			if !errors.As(err, &ce) || In("x.toml", err).Error() != want {
				t.Errorf("%d deep: %v, want %s", MaxDepth+1, In("x.toml", err), want)
			}
		})
	}
}

// TestDeepDocumentIsAnError: five million nested arrays overflow the TOML
// library's stack, a fatal error that would end this test binary; checked
// first, the document is an error naming the cap.
func TestDeepDocumentIsAnError(t *testing.T) {
	n := 5_000_000
	doc := "a = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n"
	var v map[string]any
	err := Decode([]byte(doc), &v)
	if got := In("deep.toml", err); got == nil || got.Error() != "deep.toml:1: nesting deeper than 64 levels (the cap on TOML nesting)" {
		t.Fatalf("got %v", got)
	}
}

// TestSlowShapesAreRefused: nesting some thousands deep by dotted keys,
// table headers or inline tables takes the TOML library from seconds to
// minutes (its cost grows with the cube of the depth); checked first, each
// is refused before the library sees it.
func TestSlowShapesAreRefused(t *testing.T) {
	const deep = 20_000
	for _, c := range nested[:5] {
		var v map[string]any
		err := Decode([]byte(c.doc(deep)), &v)
		var ce *CapError
		if !errors.As(err, &ce) {
			t.Errorf("%s %d deep: %v, want the nesting cap", c.name, deep, err)
		}
	}
}

// TestSizeCap: a document one byte over MaxSize is refused, naming the
// cap; ReadFile refuses such a file without reading it.
func TestSizeCap(t *testing.T) {
	big := make([]byte, MaxSize+1)
	err := Check(context.Background(), big)
	want := "67108865 bytes, more than 67108864 (the cap on the size of a TOML document, 64 MiB)"
	if err == nil || err.Error() != want {
		t.Errorf("Check: %v, want %s", err, want)
	}
	if err := Check(context.Background(), big[:MaxSize]); err != nil {
		t.Errorf("a document of exactly MaxSize bytes: %v", err)
	}
	path := filepath.Join(t.TempDir(), "big.toml")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Sparse: a file that would take a while to read if it were read.
	if err := os.Truncate(path, 1<<40); err != nil {
		t.Fatal(err)
	}
	_, err = ReadFile(path)
	want = path + ": 1099511627776 bytes, more than 67108864 (the cap on the size of a TOML document, 64 MiB)"
	if got := In(path, err); got == nil || got.Error() != want {
		t.Errorf("ReadFile: %v, want %s", got, want)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.Write(big)
		w.Close()
	}()
	_, err = ReadAll(r)
	r.Close()
	if err == nil || err.Error() != "more than 67108864 bytes (the cap on the size of a TOML document, 64 MiB)" {
		t.Errorf("ReadAll from a pipe: %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestDecodeMetaStopsWithContext: a cancelled context stops a decode
// that is under way, as a signal stops declare.
func TestDecodeMetaStopsWithContext(t *testing.T) {
	var b strings.Builder
	for i := range 2_000_000 {
		b.WriteString("[t")
		b.WriteString(strconv.Itoa(i))
		b.WriteString("]\n")
	}
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		var v map[string]any
		_, err := DecodeMeta(ctx, []byte(b.String()), &v)
		returned <- err
	}()
	cancel()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("DecodeMeta went on after its context was cancelled")
	}
}

// FuzzCheck: Check never panics, and a document it lets through that the
// TOML library decodes is never nested deeper than MaxDepth.
func FuzzCheck(f *testing.F) {
	for _, c := range nested {
		f.Add([]byte(c.doc(8)))
		f.Add([]byte(c.doc(MaxDepth)))
	}
	f.Add([]byte("a = \"\"\"\n]]]\\\"\"\"\"\nb = '''x''''\n[c]\nd = [ # ]\n 1 ]\n"))
	f.Add([]byte("a = {b = 1, c.d = [1, {e = 2}]}\n[[f.g]]\nh = 1\n"))
	f.Add([]byte("\"a.b\".'c.d' = 1\n['x'.\"y\"]\nz = 1979-05-27T07:32:00Z\nw = 3.14\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if Check(context.Background(), data) != nil {
			return
		}
		var tree map[string]any
		if _, err := toml.Decode(string(data), &tree); err != nil {
			return
		}
		if d := treeDepth(tree, 0); d > MaxDepth {
			t.Fatalf("Check let through a document %d deep:\n%q", d, data)
		}
	})
}
