package hugepage

import (
	"testing"
)

func TestSliceIsZeroedAndWritable(t *testing.T) {
	for _, n := range []int{0, 1, Size - 1, 2 * Size, 3*Size + 12345} {
		s := Slice[uint64](n)
		if len(s) != n || cap(s) != n {
			t.Fatalf("Slice(%d): len %d cap %d", n, len(s), cap(s))
		}
		for i := range s {
			if s[i] != 0 {
				t.Fatalf("Slice(%d)[%d] = %d, want 0", n, i, s[i])
			}
			s[i] = uint64(i)
		}
		for i := range s {
			if s[i] != uint64(i) {
				t.Fatalf("Slice(%d)[%d] = %d after writing %d", n, i, s[i], i)
			}
		}
	}
}

func TestSlab(t *testing.T) {
	var s Slab[[4]uint64] // 32 bytes
	a := s.Take(3, 10)
	if len(a) != 3 || cap(a) != 3 || cap(s.free) != 7 {
		t.Errorf("took %d (capacity %d) of at most 10, %d left; want 3, 3, 7", len(a), cap(a), cap(s.free))
	}
	b := s.Take(2, 7)
	if grown := append(a, [4]uint64{9}); &grown[0] == &a[0] || b[0] != ([4]uint64{}) {
		t.Errorf("appending to one part stayed in its array, over the next: %v", b[0])
	}
	most := SlabBytes / 32
	if c := s.Take(20, 1<<30); len(c) != 20 || cap(s.free) != most-20 {
		t.Errorf("took %d with %d left; want 20 and a new array of %d", len(c), cap(s.free), most)
	}
	if c := s.Take(most+1, most+1); len(c) != most+1 {
		t.Errorf("took %d, want %d: a part larger than an array", len(c), most+1)
	}
}
