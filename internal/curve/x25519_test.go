package curve

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"filippo.io/age"

	"github.com/muster-tool/muster/internal/testutil/badkeys"
)

func ageRoundTrip(t *testing.T, r age.Recipient, id age.Identity, msg []byte) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := age.Decrypt(&buf, id)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(rd)
}

// The stanza this package writes is age's, whether its share comes from
// the ladder or the table: age's own identity opens it, and only the
// identity it was sealed to.
func TestX25519InteroperatesWithAge(t *testing.T) {
	msg := []byte("the file key travels in an X25519 stanza")
	other, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		stock, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		b := BatchOf(i % 2 * 1000)
		fast := b.Recipients([]age.Recipient{stock.Recipient()})[0]
		if x, ok := fast.(x25519Recipient); !ok || x.shareTable != b.shareTable {
			t.Fatalf("recipient %s was not converted for %+v: %#v", stock.Recipient(), b, fast)
		}
		got, err := ageRoundTrip(t, fast, stock, msg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("got %q", got)
		}
		_, err = ageRoundTrip(t, fast, other, msg)
		var nim *age.NoIdentityMatchError
		if !errors.As(err, &nim) {
			t.Fatalf("opening with another key: %v, want no identity match", err)
		}
	}
}

// Sealing to a low-order point is refused, as age refuses it: the file
// key would be sealed under a key anyone can compute.
func TestX25519SealToLowOrderPointRefused(t *testing.T) {
	for _, s := range badkeys.LowOrderAge {
		r, err := age.ParseX25519Recipient(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []Batch{BatchOf(1), BatchOf(1000)} {
			if _, err := b.Recipients([]age.Recipient{r})[0].Wrap(make([]byte, 16)); err == nil {
				t.Errorf("%s: %+v wrapped a file key for a low-order point", s, b)
			}
		}
	}
}
