package bundle

import (
	"bytes"
	"sync"
	"testing"
)

// An encoder handed back to its pool is the next one handed out, and what it
// writes does not depend on what it compressed before; encoders in use at
// once are distinct.
func TestEncoderPool(t *testing.T) {
	payload := bytes.Repeat([]byte("[[line]]\nid = \"file:/etc/motd\"\nstatus = \"ok\"\n"), 4000)
	fresh, err := appendCompressed(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	p := encoderFor(len(payload))
	a, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("one encoder handed out twice at once")
	}
	a.EncodeAll(bytes.Repeat([]byte{0xa5, 0x5a, 0x00}, 200000), nil)
	p.put(b)
	p.put(a)
	if e, _ := p.get(); e != a {
		t.Error("the encoder returned last is not the next one handed out")
	} else {
		p.put(e)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			again, err := appendCompressed(nil, payload)
			if err != nil || !bytes.Equal(again, fresh) {
				t.Errorf("a reused encoder wrote a different frame (%v)", err)
			}
		})
	}
	wg.Wait()
	out, err := decompress(fresh, len(payload), "test")
	if err != nil || !bytes.Equal(out, payload) {
		t.Fatalf("round trip: %v", err)
	}
}
