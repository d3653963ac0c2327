package hugepage

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// advised reports whether the kernel's mapping that holds address p is
// marked for huge pages ("hg" in its VmFlags in /proc/self/smaps).
func advised(t *testing.T, p uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inside := false
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := mappingRange(line); ok {
			inside = lo <= p && p < hi
			continue
		}
		if inside {
			if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok {
				return strings.Contains(" "+flags+" ", " hg ")
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", p)
	return false
}

// mappingRange reads the address range at the start of a mapping's
// first line in smaps ("7f00-7f80 rw-p ...").
func mappingRange(line string) (lo, hi uintptr, ok bool) {
	field, _, _ := strings.Cut(line, " ")
	a, b, found := strings.Cut(field, "-")
	if !found {
		return 0, 0, false
	}
	x, err1 := strconv.ParseUint(a, 16, 64)
	y, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(x), uintptr(y), true
}

func TestLargeSliceIsAdvisedHuge(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("this kernel has no transparent huge pages")
	}
	if status, err := os.ReadFile("/proc/self/status"); err == nil && strings.Contains(string(status), "\nTHP_enabled:\t0") {
		t.Skip("transparent huge pages are disabled for this process (prctl PR_SET_THP_DISABLE)")
	}
	s := Slice[byte](4 * Size)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	inner := (start + Size - 1) &^ (Size - 1) // the first whole huge page
	if !advised(t, inner) {
		t.Errorf("a slice of %d bytes is not advised for huge pages", len(s))
	}
}
