package hugepage

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// advise marks the huge pages wholly inside b as wanted huge. It must
// come before they are first touched, which make leaves to the first
// write when the memory is fresh from the kernel. The kernel may refuse
// (transparent huge pages disabled, or none free): b then works as
// before.
func advise(b []byte) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start+Size-1)&^(Size-1) - start
	hi := (start+uintptr(len(b)))&^(Size-1) - start
	if hi <= lo {
		return
	}
	_ = unix.Madvise(b[lo:hi], unix.MADV_HUGEPAGE)
}
