package bincode

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var e Encoder
	e.Uint(0)
	e.Uint(math.MaxUint64)
	e.Int(math.MinInt64)
	e.Int(-1)
	e.Str("")
	e.Str("héllo\x00")
	e.Raw([]byte{1, 2, 3})
	d := Decoder{S: string(e.B)}
	if d.Uint() != 0 || d.Uint() != math.MaxUint64 || d.Int() != math.MinInt64 || d.Int() != -1 ||
		d.Str() != "" || d.Str() != "héllo\x00" || d.Fixed(3) != "\x01\x02\x03" {
		t.Fatal("values did not come back")
	}
	if d.Err != nil || d.S != "" {
		t.Fatalf("err %v, %d bytes left", d.Err, len(d.S))
	}
}

// The first failure is kept, and every read after it gives zero values.
func TestFailures(t *testing.T) {
	tests := []struct {
		name, in string
		read     func(*Decoder)
		want     string
	}{
		{"string past the end", "\x05abc", func(d *Decoder) { d.Str() }, "cut short"},
		{"fixed past the end", "ab", func(d *Decoder) { d.Fixed(3) }, "cut short"},
		{"unfinished integer", "\xff\xff", func(d *Decoder) { d.Uint() }, "cut short"},
		{"integer over 64 bits", strings.Repeat("\xff", 9) + "\x02", func(d *Decoder) { d.Uint() }, "overflows 64 bits"},
		{"count beyond what is left", "\x03ab", func(d *Decoder) { d.Count(1) }, "a count of 3, with 2 bytes left"},
		{"count of elements too big for what is left", "\x02abc", func(d *Decoder) { d.Count(2) }, "a count of 2, with 3 bytes left"},
	}
	for _, tc := range tests {
		d := Decoder{S: tc.in}
		tc.read(&d)
		if d.Err == nil || !strings.Contains(d.Err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, d.Err, tc.want)
		}
		first := d.Err
		if d.Uint() != 0 || d.Str() != "" || d.Count(1) != 0 || d.Err != first {
			t.Errorf("%s: reads after the failure gave values or replaced it", tc.name)
		}
	}
	d := Decoder{S: "\x05abc"}
	d.Str()
	if !errors.Is(d.Err, ErrShort) {
		t.Errorf("short read: %v, want ErrShort", d.Err)
	}
}

// End tells a payload read exactly from one with a failure or bytes left.
func TestEnd(t *testing.T) {
	for _, tc := range []struct {
		in    string
		reads int
		want  string
	}{
		{"\x01a\x01b", 2, ""},
		{"\x01a\x01b", 1, "does not decode: 2 bytes follow the records"},
		{"\x01a\x05b", 2, "does not decode: "},
	} {
		d := Decoder{S: tc.in}
		for range tc.reads {
			d.Str()
		}
		err := d.End("the records")
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q after %d reads: %v, want %q", tc.in, tc.reads, err, tc.want)
		}
	}
}
