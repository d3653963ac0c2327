package bundle

import (
	"bytes"
	"sync"
	"testing"
)

// An encoder used before, and encoders used at once, write the same frame
// for the same payload, and the frame decodes to it.
func TestEncoderReuse(t *testing.T) {
	payload := bytes.Repeat([]byte("[[line]]\nid = \"file:/etc/motd\"\nstatus = \"ok\"\n"), 4000)
	fresh, err := appendCompressed(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appendCompressed(nil, bytes.Repeat([]byte{0xa5, 0x5a, 0x00}, 200000)); err != nil {
		t.Fatal(err)
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
