// Package bincode is the plain binary layout muster's own caches are
// written in (the declaration cache, the fingerprints, the report cache):
// unsigned integers as uvarints, signed ones as zigzag varints, strings as
// a length and the bytes. A fresh process decodes such a cache far faster
// than a reflective codec, which pays for its type information on every
// run. Each cache lays out its own fields and versions its own format.
//
// A Decoder keeps its first failure and reads zero values after it, so a
// decoding function checks Err once at the end, or after each part it
// wants to name in an error.
package bincode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Encoder appends to B.
type Encoder struct{ B []byte }

func (e *Encoder) Uint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }
func (e *Encoder) Int(v int64)   { e.B = binary.AppendVarint(e.B, v) }
func (e *Encoder) Str(s string)  { e.Uint(uint64(len(s))); e.B = append(e.B, s...) }

// Raw appends b as it is: for fixed-size values such as digests.
func (e *Encoder) Raw(b []byte) { e.B = append(e.B, b...) }

// ErrShort is the failure of a read past the end of the input.
var ErrShort = errors.New("cut short")

// Decoder reads S. What it returns for strings are slices of S: no copy.
type Decoder struct {
	S   string
	Err error
}

// End says whether a whole payload was read: the first failure, or the
// bytes left after the last part read (what names that part, as "the
// records"); nil when the payload was read exactly.
func (d *Decoder) End(what string) error {
	if d.Err != nil {
		return fmt.Errorf("does not decode: %v", d.Err)
	}
	if len(d.S) != 0 {
		return fmt.Errorf("does not decode: %d bytes follow %s", len(d.S), what)
	}
	return nil
}

// Fail records err, unless a failure is recorded already, and empties S.
func (d *Decoder) Fail(err error) {
	if d.Err == nil {
		d.Err = err
	}
	d.S = ""
}

func (d *Decoder) Failf(format string, args ...any) { d.Fail(fmt.Errorf(format, args...)) }

// Uint reads a uvarint; one byte, the common case, is read inline.
func (d *Decoder) Uint() uint64 {
	if s := d.S; len(s) > 0 && s[0] < 0x80 {
		d.S = s[1:]
		return uint64(s[0])
	}
	return d.uintSlow()
}

func (d *Decoder) uintSlow() uint64 {
	var v uint64
	for i := 0; i < len(d.S) && i < binary.MaxVarintLen64; i++ {
		c := d.S[i]
		if i == binary.MaxVarintLen64-1 && c > 1 {
			d.Failf("an integer overflows 64 bits")
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			d.S = d.S[i+1:]
			return v
		}
	}
	d.Fail(ErrShort)
	return 0
}

// Int reads a zigzag varint, as binary.AppendVarint writes it.
func (d *Decoder) Int() int64 {
	u := d.Uint()
	return int64(u>>1) ^ -int64(u&1)
}

// Str reads a length and that many bytes.
func (d *Decoder) Str() string {
	n := d.Uint()
	if n > uint64(len(d.S)) {
		d.Fail(ErrShort)
		return ""
	}
	return d.Fixed(int(n))
}

// Fixed reads the next n bytes, written by Raw.
func (d *Decoder) Fixed(n int) string {
	if n > len(d.S) {
		d.Fail(ErrShort)
		return ""
	}
	s := d.S[:n]
	d.S = d.S[n:]
	return s
}

// Count reads the length of a list whose elements take at least least
// bytes each, bounded by what is left, so a damaged length cannot make a
// huge allocation.
func (d *Decoder) Count(least int) int {
	n := d.Uint()
	if n > uint64(len(d.S)/least) {
		if d.Err == nil {
			d.Failf("a count of %d, with %d bytes left", n, len(d.S))
		}
		return 0
	}
	return int(n)
}

// Flag appends a boolean as 0 or 1.
func (e *Encoder) Flag(b bool) {
	if b {
		e.Uint(1)
	} else {
		e.Uint(0)
	}
}

// Flag reads what Encoder.Flag wrote; anything but 0 or 1 fails.
func (d *Decoder) Flag() bool {
	switch d.Uint() {
	case 0:
		return false
	case 1:
		return true
	}
	if d.Err == nil {
		d.Failf("a flag that is neither 0 nor 1")
	}
	return false
}

// Time appends t as Unix seconds and nanoseconds; its zone is not kept.
func (e *Encoder) Time(t time.Time) {
	e.Int(t.Unix())
	e.Uint(uint64(t.Nanosecond()))
}

// Time reads what Encoder.Time wrote, in UTC; the zero time reads back as
// the zero time.
func (d *Decoder) Time() time.Time {
	sec := d.Int()
	nsec := d.Uint()
	if nsec >= 1e9 {
		d.Failf("a time of %d nanoseconds past the second", nsec)
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// Strs appends a count and the strings; nil and empty are one.
func (e *Encoder) Strs(l []string) {
	e.Uint(uint64(len(l)))
	for _, s := range l {
		e.Str(s)
	}
}

// Strs reads what Encoder.Strs wrote; none reads back as nil.
func (d *Decoder) Strs() []string {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = d.Str()
	}
	return l
}
