package generation

import (
	"errors"

	"github.com/muster-tool/muster/internal/bincode"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/resource"
)

// A host keeps the declaration it verified last in a cache (see
// internal/apply), as a NodeDeclaration in bincode's plain binary layout,
// written field by field: a timer-started apply is a fresh process, and a
// reflective codec (gob) pays for compiling its type information on every
// run, which costs more than observing the files it declares. A bool is 0
// or 1, an optional bool 0 (nil), 1 (false) or 2 (true), an optional int 0
// (nil) or 1 and the int. The layout is
// versioned by the file that holds it (apply's cacheVersion), which must
// change with it; a cache that does not decode is a miss.
// TestCacheCodecCoversEveryField fails when a field is added to one of the
// types without being added here.

type cacheEncoder struct{ bincode.Encoder }

func (e *cacheEncoder) bool(v bool) {
	if v {
		e.Uint(1)
	} else {
		e.Uint(0)
	}
}
func (e *cacheEncoder) optBool(p *bool) {
	switch {
	case p == nil:
		e.Uint(0)
	case !*p:
		e.Uint(1)
	default:
		e.Uint(2)
	}
}

// optInt is 0 for nil, else 1 and the value.
func (e *cacheEncoder) optInt(p *int) {
	if p == nil {
		e.Uint(0)
		return
	}
	e.Uint(1)
	e.Int(int64(*p))
}

// EncodeCache returns nd in the cache's layout.
func (nd *NodeDeclaration) EncodeCache() []byte {
	e := &cacheEncoder{bincode.Encoder{B: make([]byte, 0, 4096)}}
	e.Int(int64(nd.Version))
	e.Uint(nd.Generation)
	e.Str(nd.Run)
	e.Str(nd.Node)
	e.Str(nd.NodeID)
	t, _ := nd.DeclaredAt.MarshalBinary()
	e.Str(string(t))
	e.bool(nd.Prune)
	e.Uint(uint64(len(nd.Resources)))
	for i := range nd.Resources {
		s := &nd.Resources[i]
		e.Str(string(s.Kind))
		e.Str(s.Path)
		e.Str(s.Name)
		e.Str(s.State)
		e.Str(s.Content)
		e.bool(s.Secret)
		e.Str(s.Mode)
		e.bool(s.SpecialBits)
		e.Str(s.Owner)
		e.Str(s.Group)
		e.bool(s.ReplaceSymlink)
		e.Str(s.Target)
		e.Str(s.Version)
		e.optBool(s.Enabled)
		e.optBool(s.Running)
		e.Uint(uint64(len(s.RestartOn)))
		for _, p := range s.RestartOn {
			e.Str(p)
		}
		e.Int(int64(s.Order))
		e.Str(s.Encoding)
		e.Strs(s.Validate)
		e.bool(s.ValidateShell)
		e.bool(s.Purge)
		e.optInt(s.UID)
		e.optInt(s.GID)
		e.Strs(s.Groups)
		e.Str(s.Home)
		e.Str(s.Shell)
		e.bool(s.System)
	}
	e.Uint(uint64(len(nd.Recovery)))
	for _, r := range nd.Recovery {
		e.Str(r.ID)
		e.Str(string(r.Kind))
		e.Str(r.Path)
		e.Str(r.Name)
		e.Str(r.Digest)
		e.bool(r.Created)
	}
	e.Str(nd.RecoveryFrom)
	return e.B
}

type cacheDecoder struct{ bincode.Decoder }

func (d *cacheDecoder) bool() bool { return d.Uint() == 1 }

func (d *cacheDecoder) optBool() *bool {
	switch d.Uint() {
	case 0:
		return nil
	case 1:
		v := false
		return &v
	}
	v := true
	return &v
}

func (d *cacheDecoder) optInt() *int {
	if d.Uint() == 0 {
		return nil
	}
	v := int(d.Int())
	return &v
}

// DecodeCache decodes what EncodeCache wrote, from s. The strings of the
// declaration are slices of s.
func DecodeCache(s string) (*NodeDeclaration, error) {
	d := &cacheDecoder{bincode.Decoder{S: s}}
	nd := &NodeDeclaration{}
	nd.Version = int(d.Int())
	nd.Generation = d.Uint()
	nd.Run = d.Str()
	nd.Node = d.Str()
	nd.NodeID = d.Str()
	if err := nd.DeclaredAt.UnmarshalBinary([]byte(d.Str())); err != nil && d.Err == nil {
		d.Err = err
	}
	nd.Prune = d.bool()
	if n := d.Count(1); n > 0 {
		nd.Resources = make([]resource.Spec, n)
		for i := range nd.Resources {
			s := &nd.Resources[i]
			s.Kind = resource.Kind(d.Str())
			s.Path = d.Str()
			s.Name = d.Str()
			s.State = d.Str()
			s.Content = d.Str()
			s.Secret = d.bool()
			s.Mode = d.Str()
			s.SpecialBits = d.bool()
			s.Owner = d.Str()
			s.Group = d.Str()
			s.ReplaceSymlink = d.bool()
			s.Target = d.Str()
			s.Version = d.Str()
			s.Enabled = d.optBool()
			s.Running = d.optBool()
			if m := d.Count(1); m > 0 {
				s.RestartOn = make([]string, m)
				for j := range s.RestartOn {
					s.RestartOn[j] = d.Str()
				}
			}
			s.Order = int(d.Int())
			s.Encoding = d.Str()
			s.Validate = d.Strs()
			s.ValidateShell = d.bool()
			s.Purge = d.bool()
			s.UID = d.optInt()
			s.GID = d.optInt()
			s.Groups = d.Strs()
			s.Home = d.Str()
			s.Shell = d.Str()
			s.System = d.bool()
		}
	}
	if n := d.Count(1); n > 0 {
		nd.Recovery = make([]ledger.Entry, n)
		for i := range nd.Recovery {
			r := &nd.Recovery[i]
			r.ID = d.Str()
			r.Kind = resource.Kind(d.Str())
			r.Path = d.Str()
			r.Name = d.Str()
			r.Digest = d.Str()
			r.Created = d.bool()
		}
	}
	nd.RecoveryFrom = d.Str()
	if d.Err != nil {
		return nil, d.Err
	}
	if len(d.S) != 0 {
		return nil, errors.New("declaration cache has trailing bytes")
	}
	return nd, nil
}
