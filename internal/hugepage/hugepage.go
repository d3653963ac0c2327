// Package hugepage asks the kernel to back large, freshly made arrays
// with huge pages. Where memory is given to a process one 4 KiB page at
// a time, on its first touch, an array of tens of megabytes costs
// thousands of page faults; in a virtual machine each can take more
// than ten microseconds, longer than filling the page. The arrays are
// ordinary Go memory, collected as any other: the advice only changes
// how the kernel backs their pages, never what they hold.
package hugepage

import "unsafe"

// Size is the huge page size advised for. Arrays smaller than two of
// them are left alone: few would hold a whole huge page.
const Size = 2 << 20

// Slice returns make([]T, n), advised to be backed by huge pages when it
// is large enough for that to matter.
func Slice[T any](n int) []T {
	s := make([]T, n)
	var zero T
	if size := uintptr(n) * unsafe.Sizeof(zero); size >= 2*Size {
		advise(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size))
	}
	return s
}

// SlabBytes bounds the arrays a Slab makes.
const SlabBytes = 8 << 20

// A Slab hands out parts of arrays of up to SlabBytes, made with Slice:
// for a decoder that makes a great many small slices or values of one
// type, which would otherwise each be fresh memory of their own. A part
// is full (its capacity is its length), so that appending to it moves it
// to an array of its own rather than onto the next part. An array lives
// as long as any part of it. The zero Slab is ready to use.
type Slab[T any] struct{ free []T }

// Take returns n zero values. left is how many may still be taken (n
// among them), which sizes the next array: a small decoding is given a
// small array. It is a bound for the size, not for Take: more may be
// taken, in arrays of their own.
func (s *Slab[T]) Take(n, left int) []T {
	if n > len(s.free) {
		var zero T
		most := SlabBytes / max(1, int(unsafe.Sizeof(zero)))
		s.free = Slice[T](max(n, min(left, most)))
	}
	part := s.free[:n:n]
	s.free = s.free[n:]
	return part
}

// One returns a pointer to one zero value, as Take(1, left) would.
func (s *Slab[T]) One(left int) *T { return &s.Take(1, left)[0] }
