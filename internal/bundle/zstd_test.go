package bundle

import (
	"bytes"
	"testing"
)

// A prepared encoder is the next one handed out, and what it writes does
// not depend on the filler it compressed.
func TestPrepareReadiesTheNextEncoder(t *testing.T) {
	payload := bytes.Repeat([]byte("[[line]]\nid = \"file:/etc/motd\"\nstatus = \"ok\"\n"), 4000)
	before, err := appendCompressed(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	p := encoderFor(len(payload))
	Prepare(len(payload))
	p.mu.Lock()
	prepared := p.free[len(p.free)-1]
	p.mu.Unlock()
	e, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	if e != prepared {
		t.Error("the prepared encoder is not the next one handed out")
	}
	p.put(e)
	after, err := appendCompressed(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("a frame after Prepare differs from one before it")
	}
	out, err := decompress(after, len(payload), "test")
	if err != nil || !bytes.Equal(out, payload) {
		t.Fatalf("round trip: %v", err)
	}
}
