package tomlfile

import (
	"strings"
	"testing"
)

type doc struct {
	Name  string `toml:"name"`
	Count int    `toml:"count"`
}

func TestDecodeIsStrict(t *testing.T) {
	var d doc
	if err := Decode([]byte("name = \"a\"\ncount = 2\n"), &d); err != nil || d.Name != "a" || d.Count != 2 {
		t.Fatalf("good file: %v %+v", err, d)
	}
	err := Decode([]byte("name = \"a\"\ncuont = 2\n"), &d)
	if err == nil || err.Error() != `line 2: unknown key "cuont"` {
		t.Errorf("mistyped key: %v", err)
	}
	if got := In("x.toml", err); got == nil || got.Error() != `x.toml:2: unknown key "cuont"` {
		t.Errorf("In: %v, want x.toml:2: unknown key \"cuont\"", got)
	}
	// A table the reader does not know is named with its line; so is a
	// key in it, written as an inline table's.
	var n struct {
		Name string `toml:"name"`
		Apt  struct {
			Proxy string `toml:"proxy"`
		} `toml:"apt"`
	}
	for text, want := range map[string]string{
		"name = \"a\"\n\n[apt]\nproxy = \"p\"\nprxoy = \"q\"\n":     `line 5: unknown key "apt.prxoy"`,
		"name = \"a\"\n[brief]\nmin = 1\n":                          `line 2: unknown key "brief"`,
		"name = \"a\"\napt = { proxy = \"p\",\n  prxoy = \"q\" }\n": `line 3: unknown key "apt.prxoy"`,
	} {
		if err := Decode([]byte(text), &n); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", text, err, want)
		}
	}
	err = Decode([]byte("name = \"a\"\ncount = = 2\n"), &d)
	if err == nil || !strings.HasPrefix(err.Error(), "line 2:") {
		t.Errorf("syntax error: %v", err)
	}
	if got := In("x.toml", err).Error(); !strings.HasPrefix(got, "x.toml:2: ") {
		t.Errorf("In: %q, want x.toml:2: ...", got)
	}
	if err := Decode([]byte("count = \"x\"\n"), &d); err == nil {
		t.Error("wrong type accepted")
	}
}

func TestEncodeRoundTrips(t *testing.T) {
	b, err := Encode("# header", doc{Name: "x", Count: 3})
	if err != nil || !strings.HasPrefix(string(b), "# header\n") {
		t.Fatalf("%v %q", err, b)
	}
	var d doc
	if err := Decode(b, &d); err != nil || d != (doc{Name: "x", Count: 3}) {
		t.Fatalf("round trip: %v %+v", err, d)
	}
}
