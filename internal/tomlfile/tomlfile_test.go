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
	if err := Decode([]byte("name = \"a\"\ncuont = 2\n"), &d); err == nil || !strings.Contains(err.Error(), `unknown key "cuont"`) {
		t.Errorf("mistyped key: %v", err)
	}
	err := Decode([]byte("name = \"a\"\ncount = = 2\n"), &d)
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
