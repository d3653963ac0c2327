package keys

import (
	"bytes"
	"testing"
)

// A sealed text opens under the sealer that sealed it: not under another
// seed's, nor under the same seed's sealer of another label, and not once
// a byte of it changed.
func TestSealer(t *testing.T) {
	p, _ := Generate()
	q, _ := Generate()
	sealer := func(seed []byte, label string) Sealer {
		t.Helper()
		k, err := NewSealer(seed, label)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := sealer(p.Sign.Seed(), "one kind")
	body := []byte("generation = 3\n")
	sealed := k.Seal(body)
	if got, ok := k.Open(sealed); !ok || !bytes.Equal(got, body) {
		t.Fatalf("open: %q, %v", got, ok)
	}
	for name, c := range map[string]struct {
		k    Sealer
		data []byte
	}{
		"another seed":   {sealer(q.Sign.Seed(), "one kind"), sealed},
		"another label":  {sealer(p.Sign.Seed(), "another kind"), sealed},
		"a byte changed": {k, bytes.Replace(sealed, []byte("3"), []byte("2"), 1)},
		"no mac line":    {k, body},
		"cut short":      {k, sealed[:len(sealed)-1]},
	} {
		if _, ok := c.k.Open(c.data); ok {
			t.Errorf("%s: opened", name)
		}
	}
}
