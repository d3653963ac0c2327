// Package spooltest is the conformance suite every spool backend must
// pass: the guarantees of spool.Spool (create-if-absent, whole objects only,
// lexical listing by prefix, the naming rules, size limits) checked the same
// way for the directory backend and any backend written later. It holds
// only the checks; a backend's own tests call Run with a function that
// opens a fresh, empty spool.
package spooltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/spool"
)

// Run runs the conformance suite. open must return a new, empty spool each
// time it is called; it is called once per subtest.
func Run(t *testing.T, open func(t *testing.T) spool.Spool) {
	tests := []struct {
		name string
		fn   func(*testing.T, spool.Spool)
	}{
		{"PutGetStat", testPutGetStat},
		{"EmptyObject", testEmptyObject},
		{"SameBytesIsNoOp", testSameBytes},
		{"DifferentBytesConflict", testConflict},
		{"GetMissing", testMissing},
		{"Delete", testDelete},
		{"DeleteMany", testDeleteMany},
		{"BadNames", testBadNames},
		{"GoodNames", testGoodNames},
		{"GetLimit", testGetLimit},
		{"ListOrderAndBoundaries", testListBoundaries},
		{"ListMatchesPrefixFilter", testListProperty},
		{"ListStopsOnError", testListStops},
		{"ListAfter", testListAfter},
		{"ListDates", testListDates},
		{"Subdirs", testSubdirs},
		{"PutNew", testPutNew},
		{"Canceled", testCanceled},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ReaderNeverSeesPartialObject", testNoPartialReads},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

func put(t *testing.T, s spool.Spool, name string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), name, data); err != nil {
		t.Fatalf("Put(%q): %v", name, err)
	}
}

func get(t *testing.T, s spool.Spool, name string) []byte {
	t.Helper()
	data, err := s.Get(t.Context(), name, 0)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	return data
}

func list(t *testing.T, s spool.Spool, prefix string) []spool.Info {
	t.Helper()
	var got []spool.Info
	err := s.List(t.Context(), prefix, func(i spool.Info) error {
		got = append(got, i)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return got
}

func names(infos []spool.Info) []string {
	var n []string
	for _, i := range infos {
		n = append(n, i.Name)
	}
	return n
}

func testPutGetStat(t *testing.T, s spool.Spool) {
	objects := map[string][]byte{
		"mesh/keys":                   []byte("public keys"),
		"commit/00000000000000000001": []byte("run-1"),
		"report/n1/00000000000000000001-00000000000000000001": bytes.Repeat([]byte{0, 1, 2, 255}, 1000),
	}
	for name, data := range objects {
		put(t, s, name, data)
	}
	for name, data := range objects {
		if got := get(t, s, name); !bytes.Equal(got, data) {
			t.Errorf("Get(%q) = %d bytes, want the %d put", name, len(got), len(data))
		}
		info, err := s.Stat(t.Context(), name)
		if err != nil {
			t.Fatalf("Stat(%q): %v", name, err)
		}
		if info.Name != name || info.Size != int64(len(data)) {
			t.Errorf("Stat(%q) = %+v, want size %d", name, info, len(data))
		}
	}
	got := list(t, s, "")
	if len(got) != len(objects) {
		t.Fatalf("List(\"\") = %v, want the %d objects put", got, len(objects))
	}
	for _, i := range got {
		if i.Size != int64(len(objects[i.Name])) {
			t.Errorf("List size of %s = %d, want %d", i.Name, i.Size, len(objects[i.Name]))
		}
	}
	if s.String() == "" {
		t.Error("String() is empty; messages need to name the spool")
	}
}

func testEmptyObject(t *testing.T, s spool.Spool) {
	put(t, s, "e", nil)
	if got := get(t, s, "e"); len(got) != 0 {
		t.Errorf("Get of an empty object = %q", got)
	}
	if info, err := s.Stat(t.Context(), "e"); err != nil || info.Size != 0 {
		t.Errorf("Stat of an empty object = %+v, %v", info, err)
	}
	if err := s.Put(t.Context(), "e", []byte{}); err != nil {
		t.Errorf("re-putting an empty object: %v", err)
	}
	if err := s.Put(t.Context(), "e", []byte("x")); !errors.Is(err, spool.ErrConflict) {
		t.Errorf("putting bytes over an empty object: %v, want ErrConflict", err)
	}
}

func testSameBytes(t *testing.T, s spool.Spool) {
	data := bytes.Repeat([]byte("same"), 50000)
	put(t, s, "a/b", data)
	for range 3 {
		if err := s.Put(t.Context(), "a/b", bytes.Clone(data)); err != nil {
			t.Fatalf("re-putting identical bytes: %v, want nil", err)
		}
	}
	if got := list(t, s, ""); len(got) != 1 {
		t.Errorf("after re-puts List = %v, want one object", got)
	}
}

func testConflict(t *testing.T, s spool.Spool) {
	const name = "enrol/admit/tok1"
	orig := bytes.Repeat([]byte("first writer "), 1000)
	put(t, s, name, orig)
	flipped := bytes.Clone(orig)
	flipped[len(flipped)-1] ^= 1
	for _, tc := range []struct {
		what string
		data []byte
	}{
		{"one byte flipped", flipped},
		{"truncated", orig[:len(orig)-1]},
		{"extended", append(bytes.Clone(orig), 'x')},
		{"empty", nil},
	} {
		err := s.Put(t.Context(), name, tc.data)
		if !errors.Is(err, spool.ErrConflict) {
			t.Errorf("Put over an existing object (%s): %v, want ErrConflict", tc.what, err)
			continue
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("conflict error %q does not name the object", err)
		}
	}
	if got := get(t, s, name); !bytes.Equal(got, orig) {
		t.Error("a refused Put changed the object")
	}
}

func testMissing(t *testing.T, s spool.Spool) {
	put(t, s, "a/b/c", []byte("x"))
	for _, name := range []string{"nope", "a/b/d", "a/b", "a", "a/b/c/d"} {
		if _, err := s.Get(t.Context(), name, 0); !errors.Is(err, spool.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", name, err)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("Get(%q): error %q does not name the object", name, err)
		}
		if _, err := s.Stat(t.Context(), name); !errors.Is(err, spool.ErrNotFound) {
			t.Errorf("Stat(%q): %v, want ErrNotFound", name, err)
		}
	}
}

func testDelete(t *testing.T, s spool.Spool) {
	put(t, s, "report/n1/x", []byte("old"))
	put(t, s, "report/n1/y", []byte("keep"))
	if err := s.Delete(t.Context(), "report/n1/x"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(t.Context(), "report/n1/x", 0); !errors.Is(err, spool.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if got := names(list(t, s, "report/")); !slices.Equal(got, []string{"report/n1/y"}) {
		t.Errorf("List after Delete = %v, want only report/n1/y", got)
	}
	for _, name := range []string{"report/n1/x", "never", "report/n1", "report"} {
		if err := s.Delete(t.Context(), name); err != nil {
			t.Errorf("Delete(%q) of no object: %v, want nil", name, err)
		}
	}
	if got := get(t, s, "report/n1/y"); string(got) != "keep" {
		t.Errorf("Delete of other names touched report/n1/y: %q", got)
	}
	// gc deletes, and a later writer may use the name again.
	put(t, s, "report/n1/x", []byte("new"))
	if got := get(t, s, "report/n1/x"); string(got) != "new" {
		t.Errorf("Get after re-Put = %q, want new", got)
	}
}

// testDeleteMany removes many objects at once, with names of no object
// and names that only start other objects' among them. (S3's split into
// requests of a thousand is TestS3DeleteManyBatches's.)
func testDeleteMany(t *testing.T, s spool.Spool) {
	ctx := t.Context()
	var objs []spool.Object
	var doomed []string
	for i := range 60 {
		name := fmt.Sprintf("report/n%d/r%04d", i%3, i)
		objs = append(objs, spool.Object{Name: name, Data: []byte(name)})
		if i%7 != 0 {
			doomed = append(doomed, name)
		}
	}
	if err := spool.PutMany(ctx, s, objs); err != nil {
		t.Fatal(err)
	}
	doomed = append(doomed, "never", "report/n1", "report", "report/n2/r9999")
	gone, err := spool.DeleteMany(ctx, s, doomed)
	if err != nil {
		t.Fatalf("DeleteMany: %v", err)
	}
	for i, name := range doomed {
		if !gone[i] {
			t.Errorf("DeleteMany did not say %s is gone", name)
		}
	}
	var kept []string
	for i, o := range objs {
		if i%7 == 0 {
			kept = append(kept, o.Name)
		}
	}
	slices.Sort(kept)
	if got := names(list(t, s, "report/")); !slices.Equal(got, kept) {
		t.Errorf("after DeleteMany the spool holds %d objects, want the %d not named:\n%q", len(got), len(kept), got)
	}
	for _, name := range kept {
		if got := get(t, s, name); string(got) != name {
			t.Errorf("DeleteMany touched %s: %q", name, got)
		}
	}
	bad := []string{kept[0], "a//b"}
	if _, err := spool.DeleteMany(ctx, s, bad); !errors.Is(err, spool.ErrBadName) {
		t.Errorf("DeleteMany with a bad name: %v, want ErrBadName", err)
	}
	if _, err := s.Stat(ctx, kept[0]); err != nil {
		t.Errorf("DeleteMany refused for a bad name still removed %s: %v", kept[0], err)
	}
}

// testListDates: List dates each object when the store recorded it, which
// spool gc's age rule reads instead of asking per object.
func testListDates(t *testing.T, s spool.Spool) {
	before := time.Now()
	put(t, s, "decl/00000000000000000001/run/n1", []byte("bundle"))
	for _, i := range list(t, s, "decl/") {
		// A minute either way: a store's clock, and FAT's two-second
		// times.
		if i.ModTime.Before(before.Add(-time.Minute)) || i.ModTime.After(time.Now().Add(time.Minute)) {
			t.Errorf("List dates %s %v, want about %v", i.Name, i.ModTime, before)
		}
	}
}

// testSubdirs: Subdirs names the directories directly below a prefix,
// not the objects in them or directly in the prefix.
func testSubdirs(t *testing.T, s spool.Spool) {
	ctx := t.Context()
	for _, name := range []string{"decl/1/runa/n1", "decl/1/runa/n2", "decl/1/runb/n1", "decl/1/runb/deeper/n3", "decl/1/x", "decl/2/runc/n1", "decl/10/rund/n1"} {
		put(t, s, name, []byte(name))
	}
	got, err := spool.Subdirs(ctx, s, "decl/1/")
	if want := []string{"decl/1/runa/", "decl/1/runb/"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Subdirs(decl/1/) = %q, %v; want %q", got, err, want)
	}
	got, err = spool.Subdirs(ctx, s, "decl/")
	if want := []string{"decl/1/", "decl/10/", "decl/2/"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Subdirs(decl/) = %q, %v; want %q", got, err, want)
	}
	if got, err := spool.Subdirs(ctx, s, "decl/9/"); err != nil || len(got) != 0 {
		t.Errorf("Subdirs of nothing = %q, %v; want none", got, err)
	}
	if _, err := spool.Subdirs(ctx, s, "decl/1"); err == nil {
		t.Error("Subdirs of a prefix without a final /: no error")
	}
}

// badNames lists names every backend must refuse.
var badNames = []string{
	"",
	"/a",
	"a/",
	"a//b",
	".",
	"..",
	"a/../b",
	"a/./b",
	".hidden",
	"a/.muster-tmp-0123",
	"-rf",
	"a/-b",
	"a.",
	"a./b",
	"A",
	"a/B",
	"a b",
	"a\x00b",
	"a\nb",
	"a\\b",
	"a:b",
	"caf\u00e9",
	strings.Repeat("a", spool.MaxSegmentLen+1),
	strings.Repeat("a/", spool.MaxNameLen/2) + "a",
}

func testBadNames(t *testing.T, s spool.Spool) {
	ctx := t.Context()
	for _, name := range badNames {
		if err := s.Put(ctx, name, []byte("x")); !errors.Is(err, spool.ErrBadName) {
			t.Errorf("Put(%q): %v, want ErrBadName", name, err)
		}
		if _, err := s.Get(ctx, name, 0); !errors.Is(err, spool.ErrBadName) {
			t.Errorf("Get(%q): %v, want ErrBadName", name, err)
		}
		if _, err := s.Stat(ctx, name); !errors.Is(err, spool.ErrBadName) {
			t.Errorf("Stat(%q): %v, want ErrBadName", name, err)
		}
		if err := s.Delete(ctx, name); !errors.Is(err, spool.ErrBadName) {
			t.Errorf("Delete(%q): %v, want ErrBadName", name, err)
		}
	}
	for _, prefix := range []string{"/", "/a", "a//", "A", ".", "a/.", "a/.m", "-", "a/-", "a b", "a./"} {
		err := s.List(ctx, prefix, func(spool.Info) error { return nil })
		if !errors.Is(err, spool.ErrBadName) {
			t.Errorf("List(%q): %v, want ErrBadName", prefix, err)
		}
	}
	if got := list(t, s, ""); len(got) != 0 {
		t.Errorf("refused names left objects: %v", names(got))
	}
}

func testGoodNames(t *testing.T, s spool.Spool) {
	long := strings.Repeat("s", spool.MaxSegmentLen)
	longest := strings.Repeat(long[:127]+"/", spool.MaxNameLen/128) // 1024 bytes
	longest = longest[:len(longest)-1] + "z"
	good := []string{"a", "0", "_", "a_b", "a.b", "a-b", "x/y-z/1.2_3", "a..b", long, "d/" + long, longest}
	for _, name := range good {
		if err := spool.ValidName(name); err != nil {
			t.Errorf("ValidName(%q): %v", name, err)
			continue
		}
		put(t, s, name, []byte(name))
		if got := get(t, s, name); string(got) != name {
			t.Errorf("Get(%q) = %q", name, got)
		}
	}
	if len(longest) != spool.MaxNameLen {
		t.Fatalf("test bug: longest name is %d bytes", len(longest))
	}
}

func testGetLimit(t *testing.T, s spool.Spool) {
	const name = "brief/n1/00000000000000000001"
	data := bytes.Repeat([]byte{7}, 1000)
	put(t, s, name, data)
	_, err := s.Get(t.Context(), name, 999)
	if !errors.Is(err, spool.ErrTooLarge) {
		t.Fatalf("Get over the limit: %v, want ErrTooLarge", err)
	}
	for _, want := range []string{name, "1000", "999"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ErrTooLarge message %q does not say %q", err, want)
		}
	}
	for _, max := range []int64{1000, 1001, 0, -1} {
		got, err := s.Get(t.Context(), name, max)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("Get with max %d: %d bytes, %v", max, len(got), err)
		}
	}
}

func testListBoundaries(t *testing.T, s spool.Spool) {
	// Bytewise order: '-' < '.' < '/' < digits < '_' < letters, so a
	// directory's objects sort after a sibling "a.x" and before "a0".
	all := []string{
		"a-b/c",
		"a.b",
		"a/b.x",
		"a/b/1",
		"a/b/2",
		"a/b_",
		"a/bc/1",
		"a0",
		"a_",
		"ab",
		"b",
	}
	shuffled := slices.Clone(all)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) {
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	})
	for _, n := range shuffled {
		put(t, s, n, []byte(n))
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a", all[:10]},
		{"a/", all[2:7]},
		{"a/b", all[2:7]},
		{"a/b/", all[3:5]},
		{"a/b/1", all[3:4]},
		{"a/bc", all[6:7]},
		{"a/bc/", all[6:7]},
		{"a/b.", all[2:3]},
		{"a-", all[:1]},
		{"a-b/", all[:1]},
		{"a.b", all[1:2]},
		{"a/c", nil},
		{"a/b/1/", nil},
		{"a/b/3", nil},
		{"c", nil},
		{"zz/", nil},
	} {
		if got := names(list(t, s, tc.prefix)); !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

// testListProperty checks List against the definition (every name with the
// prefix, sorted) for random names and every prefix of them.
func testListProperty(t *testing.T, s spool.Spool) {
	r := rand.New(rand.NewPCG(3, 4))
	segment := func() string {
		const first, mid = "ab0_", "ab0-._"
		b := []byte{first[r.IntN(len(first))]}
		for range r.IntN(3) {
			b = append(b, mid[r.IntN(len(mid))])
		}
		if b[len(b)-1] == '.' {
			b[len(b)-1] = 'z'
		}
		return string(b)
	}
	var all []string
	taken := map[string]bool{} // names and the directories above them
	for len(all) < 80 {
		segs := make([]string, 1+r.IntN(3))
		for i := range segs {
			segs[i] = segment()
		}
		name := strings.Join(segs, "/")
		// Skip a name that is an existing object or directory, or
		// that runs through an existing object.
		ok := !taken[name]
		for i := 1; i < len(segs); i++ {
			dir := strings.Join(segs[:i], "/")
			if taken[dir] && !taken[dir+"/"] {
				ok = false
			}
		}
		if !ok {
			continue
		}
		taken[name] = true
		for i := 1; i < len(segs); i++ {
			dir := strings.Join(segs[:i], "/")
			taken[dir], taken[dir+"/"] = true, true
		}
		all = append(all, name)
		put(t, s, name, []byte(name))
	}
	slices.Sort(all)
	prefixes := map[string]bool{"": true}
	for _, n := range all {
		for i := 1; i <= len(n); i++ {
			prefixes[n[:i]] = true
		}
		prefixes[n+"/"] = true
	}
	checked := 0
	for p := range prefixes {
		if spool.ValidPrefix(p) != nil {
			continue
		}
		var want []string
		for _, n := range all {
			if strings.HasPrefix(n, p) {
				want = append(want, n)
			}
		}
		if got := names(list(t, s, p)); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", p, got, want)
		}
		checked++
	}
	if checked < 150 {
		t.Fatalf("test bug: only %d prefixes checked", checked)
	}
	t.Logf("%d prefixes checked", checked)
}

func testListStops(t *testing.T, s spool.Spool) {
	for i := range 5 {
		put(t, s, fmt.Sprintf("x/%d/y", i), nil)
	}
	stop := errors.New("stop")
	calls := 0
	err := s.List(t.Context(), "x/", func(spool.Info) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("List with fn failing: err %v after %d calls, want fn's error after 1", err, calls)
	}
}

func testCanceled(t *testing.T, s spool.Spool) {
	put(t, s, "a/b", []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, "a/c", []byte("y")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a canceled context: %v", err)
	}
	if _, err := s.Get(ctx, "a/b", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a canceled context: %v", err)
	}
	err := s.List(ctx, "", func(spool.Info) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("List with a canceled context: %v", err)
	}
	if got := names(list(t, s, "")); !slices.Equal(got, []string{"a/b"}) {
		t.Errorf("a canceled Put left %v", got)
	}
}

// testConcurrentWriters races writers for the same names. Where they write
// the same bytes all succeed; where they differ exactly one wins, the rest
// get ErrConflict, and the object holds the winner's bytes.
func testConcurrentWriters(t *testing.T, s spool.Spool) {
	const writers, objects = 16, 24
	name := func(i int) string { return fmt.Sprintf("race/%02d/obj", i) }
	payload := func(w, i int) []byte {
		if i%2 == 0 {
			w = 0 // every writer writes the same bytes
		}
		return bytes.Repeat(fmt.Appendf(nil, "writer %d object %d;", w, i), 200+i)
	}
	errs := make([][]error, writers)
	var start, done sync.WaitGroup
	start.Add(1)
	for w := range writers {
		errs[w] = make([]error, objects)
		done.Go(func() {
			start.Wait()
			for k := range objects {
				i := (k + w) % objects // vary the order between writers
				errs[w][i] = s.Put(t.Context(), name(i), payload(w, i))
			}
		})
	}
	start.Done()
	done.Wait()
	for i := range objects {
		winners := 0
		var winner int
		for w := range writers {
			switch err := errs[w][i]; {
			case err == nil:
				winners++
				winner = w
			case !errors.Is(err, spool.ErrConflict) || i%2 == 0:
				t.Errorf("writer %d, %s: %v", w, name(i), err)
			}
		}
		got := get(t, s, name(i))
		switch {
		case i%2 == 0 && winners != writers:
			t.Errorf("%s: %d of %d writers of identical bytes succeeded", name(i), winners, writers)
		case i%2 == 1 && winners != 1:
			t.Errorf("%s: %d writers of different bytes succeeded, want exactly 1", name(i), winners)
		case !bytes.Equal(got, payload(winner, i)):
			t.Errorf("%s holds %.30q..., not the winner's bytes", name(i), got)
		}
	}
	if got := list(t, s, "race/"); len(got) != objects {
		t.Errorf("List after the race = %d objects, want %d", len(got), objects)
	}
}

// testNoPartialReads polls List and Get while large objects are written: a
// reader must see each object whole or not at all.
func testNoPartialReads(t *testing.T, s spool.Spool) {
	const count = 8
	name := func(i int) string { return fmt.Sprintf("big/%02d", i) }
	want := make([][]byte, count)
	for i := range want {
		b := make([]byte, 1<<20+i*4099)
		r := rand.NewChaCha8([32]byte{byte(i)})
		r.Read(b)
		want[i] = b
	}
	var (
		wg       sync.WaitGroup
		writeErr error
		finished = make(chan struct{})
	)
	wg.Go(func() {
		defer close(finished)
		for i := range count {
			if err := s.Put(t.Context(), name(i), want[i]); err != nil {
				writeErr = err
				return
			}
		}
	})
	check := func(i int, data []byte) bool {
		if !bytes.Equal(data, want[i]) {
			t.Errorf("reader saw %s with %d bytes, want the whole %d", name(i), len(data), len(want[i]))
			return false
		}
		return true
	}
	polls := 0
	for done := false; !done; polls++ {
		select {
		case <-finished:
			done = true // one last look once everything is written
		default:
		}
		seen := list(t, s, "big/")
		for k, info := range seen {
			var i int
			fmt.Sscanf(info.Name, "big/%d", &i)
			if info.Size != int64(len(want[i])) {
				t.Fatalf("List shows %s with size %d, want %d", info.Name, info.Size, len(want[i]))
			}
			if k == len(seen)-1 && !check(i, get(t, s, info.Name)) {
				t.FailNow()
			}
		}
		// The next object may appear at any moment; Get must return
		// it whole or not at all.
		if next := len(seen); next < count {
			data, err := s.Get(t.Context(), name(next), 0)
			if err == nil && !check(next, data) {
				t.FailNow()
			}
			if err != nil && !errors.Is(err, spool.ErrNotFound) {
				t.Fatalf("Get(%s) while written: %v", name(next), err)
			}
		}
		if done && len(seen) != count {
			t.Fatalf("after the writer finished List shows %d objects, want %d", len(seen), count)
		}
	}
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	t.Logf("%d polls", polls)
}

// testListAfter checks spool.ListAfter against List: the same objects,
// less those at or before the name given, whether or not that name is an
// object; where the backend gives ETags, an object keeps its tag and two
// objects with other bytes have other tags.
func testListAfter(t *testing.T, s spool.Spool) {
	all := []string{"commit/01", "commit/02", "commit/02x", "commit/03", "commit/05", "report/a"}
	for _, n := range all {
		put(t, s, n, []byte("bytes of "+n))
	}
	listAfter := func(prefix, after string) []spool.Info {
		var got []spool.Info
		if err := spool.ListAfter(t.Context(), s, prefix, after, func(i spool.Info) error {
			got = append(got, i)
			return nil
		}); err != nil {
			t.Fatalf("ListAfter(%q, %q): %v", prefix, after, err)
		}
		return got
	}
	for _, tc := range []struct {
		prefix, after string
		want          []string
	}{
		{"commit/", "", all[:5]},
		{"commit/", "commit/01", all[1:5]},
		{"commit/", "commit/02", all[2:5]},
		{"commit/", "commit/04", all[4:5]},
		{"commit/", "commit/05", nil},
		{"commit/", "commit/", all[:5]},
		{"", "commit/05", all[5:]},
		{"report/", "commit/02", all[5:]},
	} {
		if got := names(listAfter(tc.prefix, tc.after)); !slices.Equal(got, tc.want) {
			t.Errorf("ListAfter(%q, %q) = %q, want %q", tc.prefix, tc.after, got, tc.want)
		}
	}
	first := listAfter("commit/", "")
	for i, info := range listAfter("commit/", "") {
		if info != first[i] {
			t.Errorf("listed twice, %s is %+v, then %+v", info.Name, first[i], info)
		}
		if info.Size != int64(len("bytes of "+info.Name)) {
			t.Errorf("%s: size %d", info.Name, info.Size)
		}
		if info.ETag != "" && i > 0 && info.ETag == first[i-1].ETag {
			t.Errorf("%s and %s, other bytes, have one ETag %q", info.Name, first[i-1].Name, info.ETag)
		}
	}
}

// testPutNew checks spool.PutNew: Put's guarantees for a name no one
// else uses, and the same refusal of other bytes under a taken name.
func testPutNew(t *testing.T, s spool.Spool) {
	ctx := t.Context()
	if err := spool.PutNew(ctx, s, "report/n/1", []byte("one")); err != nil {
		t.Fatalf("PutNew: %v", err)
	}
	if got := get(t, s, "report/n/1"); string(got) != "one" {
		t.Errorf("Get after PutNew = %q", got)
	}
	if err := spool.PutNew(ctx, s, "report/n/1", []byte("one")); err != nil {
		t.Errorf("PutNew of the same bytes again: %v", err)
	}
	if err := spool.PutNew(ctx, s, "report/n/1", []byte("two")); !errors.Is(err, spool.ErrConflict) {
		t.Errorf("PutNew of other bytes under a taken name: %v, want ErrConflict", err)
	}
	if got := get(t, s, "report/n/1"); string(got) != "one" {
		t.Errorf("the object was replaced: %q", got)
	}
}
