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
