package bundle

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"filippo.io/age"
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

// The stanza this package writes is age's: stock age opens it, and this
// package opens what stock age writes.
func TestX25519InteroperatesWithAge(t *testing.T) {
	msg := []byte("the file key travels in an X25519 stanza")
	for range 20 {
		stock, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		fastR := fastRecipients([]age.Recipient{stock.Recipient()})[0]
		if _, ok := fastR.(x25519Recipient); !ok {
			t.Fatalf("recipient %s was not converted", stock.Recipient())
		}
		fastID := fastIdentity(stock)
		if _, ok := fastID.(x25519Identity); !ok {
			t.Fatalf("identity was not converted")
		}
		for _, c := range []struct {
			name string
			r    age.Recipient
			id   age.Identity
		}{
			{"ours to stock age", fastR, stock},
			{"stock age to ours", stock.Recipient(), fastID},
			{"ours to ours", fastR, fastID},
		} {
			got, err := ageRoundTrip(t, c.r, c.id, msg)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !bytes.Equal(got, msg) {
				t.Fatalf("%s: got %q", c.name, got)
			}
		}
	}
}

func TestX25519WrongIdentityIsIncorrect(t *testing.T) {
	a, _ := age.GenerateX25519Identity()
	b, _ := age.GenerateX25519Identity()
	_, err := ageRoundTrip(t, fastRecipients([]age.Recipient{a.Recipient()})[0], fastIdentity(b), []byte("x"))
	var nim *age.NoIdentityMatchError
	if !errors.As(err, &nim) {
		t.Fatalf("opening with another key: %v, want no identity match", err)
	}
}

func TestX25519IdentityRefusesMalformedStanzas(t *testing.T) {
	a, _ := age.GenerateX25519Identity()
	id := fastIdentity(a)
	stanzas, err := fastRecipients([]age.Recipient{a.Recipient()})[0].Wrap(make([]byte, fileKeySize))
	if err != nil {
		t.Fatal(err)
	}
	good := *stanzas[0]
	for _, c := range []struct {
		name string
		edit func(s *age.Stanza)
		want string
	}{
		{"two arguments", func(s *age.Stanza) { s.Args = append(s.Args, "x") }, "invalid X25519 recipient block"},
		{"padded base64", func(s *age.Stanza) { s.Args = []string{s.Args[0] + "="} }, "failed to parse"},
		{"short share", func(s *age.Stanza) { s.Args = []string{s.Args[0][:20]} }, "invalid X25519 recipient block"},
		{"low-order share", func(s *age.Stanza) { s.Args = []string{stanzaBase64.EncodeToString(make([]byte, 32))} }, "invalid X25519 recipient"},
		{"long body", func(s *age.Stanza) { s.Body = append(bytes.Clone(s.Body), 0) }, "incorrect file key size"},
	} {
		s := good
		s.Args = append([]string(nil), good.Args...)
		c.edit(&s)
		_, err := id.Unwrap([]*age.Stanza{&s})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	flipped := good
	flipped.Body = bytes.Clone(good.Body)
	flipped.Body[0] ^= 1
	if _, err := id.Unwrap([]*age.Stanza{&flipped}); !errors.Is(err, age.ErrIncorrectIdentity) {
		t.Errorf("flipped body: %v, want incorrect identity", err)
	}
	if k, err := id.Unwrap([]*age.Stanza{{Type: "scrypt"}, &good}); err != nil || len(k) != fileKeySize {
		t.Errorf("stanza after one of another type: %v", err)
	}
}

func TestDecodeAgeKey(t *testing.T) {
	a, _ := age.GenerateX25519Identity()
	pub := a.Recipient().String()
	if _, err := decodeAgeKey(pub, "age"); err != nil {
		t.Fatalf("%s: %v", pub, err)
	}
	if _, err := decodeAgeKey(a.String(), "age-secret-key-"); err != nil {
		t.Fatalf("secret key: %v", err)
	}
	bad := []byte(pub)
	bad[10] = 'q'
	if pub[10] == 'q' {
		bad[10] = 'p'
	}
	for _, s := range []string{string(bad), strings.ToUpper(pub[:5]) + pub[5:], "age1", pub[:len(pub)-1]} {
		if _, err := decodeAgeKey(s, "age"); err == nil {
			t.Errorf("%q decoded", s)
		}
	}
	if _, err := decodeAgeKey(pub, "age-secret-key-"); err == nil {
		t.Error("public key decoded as a secret key")
	}
}
