package declaration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNestingCap: a declaration nested past the cap is a problem naming
// the file, the line and the cap, with every other file still checked; five
// million levels, which would overflow the TOML library's stack, are no
// different; twenty thousand levels of inline tables, minutes of work for
// the library, take none.
func TestNestingCap(t *testing.T) {
	for _, c := range []struct {
		name, deep string
		line       int
	}{
		{"crash", "[role.web]\nnodes = " + strings.Repeat("[", 5_000_000) + strings.Repeat("]", 5_000_000) + "\n", 2},
		{"slow", "[role.web]\nnodes = [\"*\"]\nx = " + strings.Repeat("{a=", 20_000) + "1" + strings.Repeat("}", 20_000) + "\n", 3},
	} {
		_, problems := parseFiles(t, map[string]string{
			"deep.toml": c.deep,
			"ok.toml":   "[role.db]\nnodes = [\"db-*\"]\ncolour = 1\n",
		})
		want := "deep.toml:" + strconv.Itoa(c.line) + ": nesting deeper than 64 levels (the cap on TOML nesting)"
		if len(problems) != 2 || problems[0].String() != want || !strings.HasPrefix(problems[1].String(), "ok.toml:3: role.db.colour: ") {
			t.Errorf("%s: got %v, want %q and ok.toml's problem", c.name, problems, want)
		}
	}
}

// TestLoadSizeCap: a declaration file over the size cap is refused before
// it is read, naming the file and the cap.
func TestLoadSizeCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.toml")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 100<<30); err != nil { // sparse: nothing is read
		t.Fatal(err)
	}
	_, err := Load([]string{path}, nil)
	want := "reading declaration file: " + path + ": 107374182400 bytes, more than 67108864 (the cap on the size of a TOML document, 64 MiB)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestParseContextStops: a cancelled context ends a parse that is under
// way, without waiting for the TOML library.
func TestParseContextStops(t *testing.T) {
	var b strings.Builder
	b.WriteString("[role.all]\nnodes = [\"*\"]\n")
	for i := range 300_000 {
		b.WriteString("[role.all.file.\"/etc/f" + strconv.Itoa(i) + "\"]\ncontent = \"x\"\n")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, problems, err := ParseContext(ctx, []Source{{Name: "big.toml", Data: []byte(b.String()), Dir: "."}})
	if !errors.Is(err, context.Canceled) || d != nil || problems != nil {
		t.Errorf("got %v, %v, %v", d, problems, err)
	}
}
