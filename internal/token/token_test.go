package token

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

const fp = "00112233445566778899aabbccddeeff"

func TestRoundTripAndLength(t *testing.T) {
	name := strings.Repeat("a", MaxName)
	tok, err := New(name, fp, time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	s := tok.String()
	if len(s) >= 200 {
		t.Errorf("token with the longest name is %d characters, want < 200", len(s))
	}
	if !strings.HasPrefix(s, Prefix) || strings.ContainsAny(s, " \n\t") {
		t.Errorf("token %q: want one line starting with %s", s, Prefix)
	}
	got, err := Parse("  \n" + s + "\r\n ")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != name || got.Secret != tok.Secret || got.MeshFingerprint() != fp || !got.Expires.Equal(tok.Expires) {
		t.Errorf("round trip changed the token: %+v vs %+v", got, tok)
	}
	if got.ID() != tok.ID() || len(tok.ID()) != 32 {
		t.Errorf("token ids differ or have the wrong length: %s %s", got.ID(), tok.ID())
	}
}

// Every single-character change is caught before anything is sent.
func TestEveryMistypedCharacterIsCaught(t *testing.T) {
	tok, err := New("web-1.example", fp, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	s := tok.String()
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	for i := len(Prefix); i < len(s); i++ {
		for _, c := range []byte{alphabet[(strings.IndexByte(alphabet, s[i])+1)%32], alphabet[(strings.IndexByte(alphabet, s[i])+17)%32], '0'} {
			b := []byte(s)
			b[i] = c
			if _, err := Parse(string(b)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("changing position %d to %q: got %v, want ErrMalformed", i, c, err)
			}
		}
	}
	for _, cut := range []int{1, 5, len(s) - len(Prefix) - 1} {
		if _, err := Parse(s[:len(s)-cut]); !errors.Is(err, ErrMalformed) {
			t.Errorf("token cut by %d: got %v", cut, err)
		}
	}
	if _, err := Parse("AGE-SECRET-KEY-1ABC"); !errors.Is(err, ErrMalformed) {
		t.Errorf("wrong prefix accepted: %v", err)
	}
}

func TestNames(t *testing.T) {
	for _, bad := range []string{"", "Web1", "-web", "web-", "a b", "web_1", strings.Repeat("a", MaxName+1), "../x"} {
		if _, err := New(bad, fp, time.Now()); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	for _, good := range []string{"a", "web-1", "db.eu-west.example", "1host"} {
		if err := CheckName(good); err != nil {
			t.Errorf("name %q refused: %v", good, err)
		}
	}
}

// An expiry the token cannot carry is refused, not wrapped around into
// another time.
func TestExpiryOutOfRange(t *testing.T) {
	for _, exp := range []time.Time{time.Date(2107, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0), time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, err := New("x", fp, exp); err == nil {
			t.Errorf("expiry %s accepted", exp)
		}
	}
	last := time.Unix(math.MaxUint32, 0).UTC()
	tok, err := New("x", fp, last)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(tok.String())
	if err != nil || !got.Expires.Equal(last) {
		t.Errorf("the last representable expiry came back as %v, %v", got, err)
	}
}

func TestSecretsAreFresh(t *testing.T) {
	a, _ := New("x", fp, time.Now())
	b, _ := New("x", fp, time.Now())
	if a.Secret == b.Secret || a.ID() == b.ID() {
		t.Error("two tokens share a secret")
	}
}

func FuzzParse(f *testing.F) {
	tok, _ := New("web-1", fp, time.Unix(1900000000, 0))
	f.Add(tok.String())
	f.Add(Prefix)
	f.Add(Prefix + "AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(got.String())
		if err != nil || again.Name != got.Name || again.Secret != got.Secret {
			t.Fatalf("accepted token does not round trip: %q", s)
		}
	})
}
