package apply

import (
	"encoding/binary"
	"errors"

	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/resource"
)

// The declaration cache holds a NodeDeclaration in a plain binary layout
// written field by field: a timer-started apply is a fresh process, and a
// reflective codec (gob) pays for compiling its type information on every
// run, which cost more than observing a thousand files. Integers are
// uvarints, strings are a length and the bytes, an optional bool is 0 (nil),
// 1 (false) or 2 (true). The layout is private to this file and versioned
// by cacheVersion; a cache that does not decode is a miss.
// TestCacheCodecCoversEveryField fails when a field is added to one of the
// types without being added here.

type cacheEncoder struct{ b []byte }

func (e *cacheEncoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *cacheEncoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *cacheEncoder) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *cacheEncoder) bool(v bool) {
	if v {
		e.uint(1)
	} else {
		e.uint(0)
	}
}
func (e *cacheEncoder) optBool(p *bool) {
	switch {
	case p == nil:
		e.uint(0)
	case !*p:
		e.uint(1)
	default:
		e.uint(2)
	}
}

func encodeCachedDeclaration(nd *generation.NodeDeclaration) []byte {
	e := &cacheEncoder{b: make([]byte, 0, 4096)}
	e.int(int64(nd.Version))
	e.uint(nd.Generation)
	e.str(nd.Run)
	e.str(nd.Node)
	e.str(nd.NodeID)
	t, _ := nd.DeclaredAt.MarshalBinary()
	e.str(string(t))
	e.bool(nd.Prune)
	e.uint(uint64(len(nd.Resources)))
	for i := range nd.Resources {
		s := &nd.Resources[i]
		e.str(string(s.Kind))
		e.str(s.Path)
		e.str(s.Name)
		e.str(s.State)
		e.str(s.Content)
		e.bool(s.Secret)
		e.str(s.Mode)
		e.str(s.Owner)
		e.str(s.Group)
		e.str(s.Target)
		e.str(s.Version)
		e.optBool(s.Enabled)
		e.optBool(s.Running)
		e.uint(uint64(len(s.RestartOn)))
		for _, p := range s.RestartOn {
			e.str(p)
		}
		e.int(int64(s.Order))
	}
	e.uint(uint64(len(nd.Recovery)))
	for _, r := range nd.Recovery {
		e.str(r.ID)
		e.str(string(r.Kind))
		e.str(r.Path)
		e.str(r.Name)
		e.str(r.Digest)
		e.bool(r.Created)
	}
	e.str(nd.RecoveryFrom)
	return e.b
}

var errCacheShort = errors.New("declaration cache is cut short")

type cacheDecoder struct {
	s   string
	err error
}

func (d *cacheDecoder) uint() uint64 {
	var v uint64
	for i := 0; i < len(d.s) && i < binary.MaxVarintLen64; i++ {
		c := d.s[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			d.s = d.s[i+1:]
			return v
		}
	}
	d.fail()
	return 0
}

func (d *cacheDecoder) int() int64 {
	u := d.uint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *cacheDecoder) fail() {
	if d.err == nil {
		d.err = errCacheShort
	}
	d.s = ""
}

// str returns the next string as a slice of the input: no copy.
func (d *cacheDecoder) str() string {
	n := d.uint()
	if n > uint64(len(d.s)) {
		d.fail()
		return ""
	}
	s := d.s[:n]
	d.s = d.s[n:]
	return s
}

func (d *cacheDecoder) bool() bool { return d.uint() == 1 }

func (d *cacheDecoder) optBool() *bool {
	switch d.uint() {
	case 0:
		return nil
	case 1:
		v := false
		return &v
	}
	v := true
	return &v
}

// count reads a slice length, bounded by what is left so a damaged length
// cannot make a huge allocation.
func (d *cacheDecoder) count() int {
	n := d.uint()
	if n > uint64(len(d.s)) {
		d.fail()
		return 0
	}
	return int(n)
}

// decodeCachedDeclaration decodes a cache whose bytes are in s. The
// strings of the declaration are slices of s.
func decodeCachedDeclaration(s string) (*generation.NodeDeclaration, error) {
	d := &cacheDecoder{s: s}
	nd := &generation.NodeDeclaration{}
	nd.Version = int(d.int())
	nd.Generation = d.uint()
	nd.Run = d.str()
	nd.Node = d.str()
	nd.NodeID = d.str()
	if err := nd.DeclaredAt.UnmarshalBinary([]byte(d.str())); err != nil && d.err == nil {
		d.err = err
	}
	nd.Prune = d.bool()
	if n := d.count(); n > 0 {
		nd.Resources = make([]resource.Spec, n)
		for i := range nd.Resources {
			s := &nd.Resources[i]
			s.Kind = resource.Kind(d.str())
			s.Path = d.str()
			s.Name = d.str()
			s.State = d.str()
			s.Content = d.str()
			s.Secret = d.bool()
			s.Mode = d.str()
			s.Owner = d.str()
			s.Group = d.str()
			s.Target = d.str()
			s.Version = d.str()
			s.Enabled = d.optBool()
			s.Running = d.optBool()
			if m := d.count(); m > 0 {
				s.RestartOn = make([]string, m)
				for j := range s.RestartOn {
					s.RestartOn[j] = d.str()
				}
			}
			s.Order = int(d.int())
		}
	}
	if n := d.count(); n > 0 {
		nd.Recovery = make([]ledger.Entry, n)
		for i := range nd.Recovery {
			r := &nd.Recovery[i]
			r.ID = d.str()
			r.Kind = resource.Kind(d.str())
			r.Path = d.str()
			r.Name = d.str()
			r.Digest = d.str()
			r.Created = d.bool()
		}
	}
	nd.RecoveryFrom = d.str()
	if d.err != nil {
		return nil, d.err
	}
	if len(d.s) != 0 {
		return nil, errors.New("declaration cache has trailing bytes")
	}
	return nd, nil
}
