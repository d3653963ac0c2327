// Package hugepage asks the kernel to back large, freshly made arrays
// with huge pages. Where memory is given to a process one 4 KiB page at
// a time, on its first touch, an array of tens of megabytes costs
// thousands of page faults; in a virtual machine each can take tens of
// microseconds, more than filling the array. The arrays are ordinary Go
// memory, collected as any other: the advice only changes how the kernel
// backs their pages, never what they hold.
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
