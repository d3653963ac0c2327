package cli

import (
	"bytes"
	"testing"
)

func TestUTF8Locale(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"LANG": "C"}, false},
		{map[string]string{"LANG": "POSIX"}, false},
		{map[string]string{"LANG": "en_GB.UTF-8"}, true},
		{map[string]string{"LANG": "de_DE.utf8"}, true},
		{map[string]string{"LANG": "C.UTF-8", "LC_ALL": "C"}, false},
		{map[string]string{"LANG": "C", "LC_CTYPE": "C.UTF-8"}, true},
		{map[string]string{"LANG": "C", "LC_ALL": "C.UTF-8"}, true},
	} {
		if got := utf8Locale(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: utf8Locale = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// Under a locale that is not UTF-8 the characters muster writes are
// spelled in ASCII, even when a write splits one; JSON is written as it
// is.
func TestASCIIWriter(t *testing.T) {
	var buf bytes.Buffer
	a := &asciiWriter{w: &buf}
	text := "mode 0600 → 0644; owner 0 ≠ declared 33; sha256:df97…"
	b := []byte(text)
	for i := 0; i < len(b); i += 5 {
		n, err := a.Write(b[i:min(i+5, len(b))])
		if err != nil || n != min(5, len(b)-i) {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if want := "mode 0600 -> 0644; owner 0 != declared 33; sha256:df97..."; buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
	buf.Reset()
	if err := writeJSON(a, map[string]string{"detail": "mode 0600 → 0644"}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"detail\": \"mode 0600 → 0644\"\n}\n"; buf.String() != want {
		t.Errorf("JSON under LANG=C: got %q, want %q", buf.String(), want)
	}
	if ellipsisFor(a) != "..." || ellipsisFor(&buf) != "…" {
		t.Error("a table under LANG=C must shorten with three dots")
	}
}
