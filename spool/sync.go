package spool

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// SyncOptions tunes Sync. The zero value copies with DefaultSyncWorkers
// workers, compares objects present on both sides by size only (but the
// small ones AlwaysCompared names by content), and does no structural
// check.
type SyncOptions struct {
	// Check compares the content of objects present on both sides with
	// the same size, instead of assuming they are equal.
	Check bool
	// DryRun reads and checks what would be copied but writes nothing.
	DryRun bool
	// Workers is how many objects are copied at once, and how many
	// goroutines walk two directory spools (default DefaultSyncWorkers).
	Workers int
	// MaxObject bounds the size of one object (default DefaultMaxObject).
	MaxObject int64
	// Validate, if set, checks an object's bytes before they are copied
	// (the CLI passes the bundle header check of spool verify). An object
	// it refuses is reported as damaged and not copied, so a truncated
	// copy on a USB stick does not spread. It is a parameter so that the
	// spool stays below the bundle format.
	Validate func(name string, data []byte) error
	// Progress, if set, is called after each object is handled, from one
	// goroutine at a time.
	Progress func(SyncProgress)
}

// DefaultSyncWorkers is how many objects Sync copies at once by default.
const DefaultSyncWorkers = 8

// SyncProgress is the state of a sync after one more object was handled.
type SyncProgress struct {
	Name  string // the object just handled
	Done  int    // objects handled so far
	Total int    // objects to handle: those missing at the destination, plus those compared
	Bytes int64  // bytes copied so far
}

// SyncResult says what a sync did (or, with DryRun, would do).
type SyncResult struct {
	Copied  int   // objects copied to the destination
	Bytes   int64 // bytes copied
	Skipped int   // objects the destination already had
	// Conflicts are objects present on both sides with different bytes.
	// Sync never resolves them: neither side is changed.
	Conflicts []SyncIssue
	// Damaged are source objects not copied because they failed
	// Validate, changed size while read, or are too large, and commits
	// held back because objects of their generation were not copied.
	Damaged []SyncIssue
}

// SyncIssue is one object Sync did not bring into agreement, and why.
type SyncIssue struct {
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

// ErrDamaged is wrapped by Sync's error when source objects were not
// copied because they are damaged.
var ErrDamaged = errors.New("damaged objects not copied")

// Sync copies to dst every object of src that dst lacks, so that dst ends
// up with the union of both; it never overwrites or deletes. Run it both
// ways to merge two copies of a spool that both grew.
//
// Objects are listed on both sides and matched by name and size, without
// reading content (unless Check is set), except the small objects that
// decide a generation and the mesh (AlwaysCompared), which are compared by
// content, so that two commits of one generation are a conflict even when
// they have the same size. Those are compared by their bytes, never by
// size and modification time as rsync does: a copy made by cp -p or
// rsync -a keeps the times of what it copied, FAT keeps them to 2
// seconds, and a record damaged or rewritten in place can keep both.
// Where a listing gives ETags (S3), equal tags, or a tag that is the MD5
// of the other side's bytes in a directory, show equal content without a
// GET, so a sync from or to S3 with nothing new costs its listings alone
// (one request per 1,000 objects). Two directory spools are walked in
// step instead of listed, by several goroutines (see matchDirs).
//
// Each object dst lacks is read from src, checked (size as listed,
// Validate), put to dst, and read back from dst and compared (size and
// SHA-256) with what was read. Temp files are never listed, so never
// copied. Commits (commit/<generation>) are copied last, after every other
// object, and a commit is held back if any object of its generation could
// not be copied: at the destination a generation never appears before its
// declarations.
//
// An interrupted sync leaves dst with whole objects only; running it again
// copies what is still missing. Objects that exist on both sides with
// different bytes are conflicts, and source objects that fail the checks
// are damaged: both are listed in the result and make the error wrap
// ErrConflict or ErrDamaged, but do not stop the other copies. Any other
// error (a spool unavailable, a read-back that does not match) stops the
// sync and is returned with what was done so far.
func Sync(ctx context.Context, src, dst Spool, opts SyncOptions) (SyncResult, error) {
	if opts.Workers <= 0 {
		opts.Workers = DefaultSyncWorkers
	}
	if opts.MaxObject <= 0 {
		opts.MaxObject = DefaultMaxObject
	}
	var plan syncPlan
	var err error
	if s, d, ok := bothDirs(src, dst); ok {
		err = plan.matchDirs(ctx, s, d, opts)
	} else {
		err = plan.matchListed(ctx, src, dst, opts)
	}
	if err != nil {
		return SyncResult{}, err
	}
	copies, commits, compares := plan.copies, plan.commits, plan.compares
	res := SyncResult{Skipped: plan.skipped}
	r := &syncRun{src: src, dst: dst, opts: opts, res: res}
	r.total = len(copies) + len(commits) + len(compares)
	// Everything but commits first; what of a generation could not be
	// copied holds back its commit.
	if err := r.run(ctx, slices.Concat(compares, copies)); err != nil {
		return r.result(), err
	}
	held := r.unfinishedGenerations()
	var ready []syncTask
	for _, t := range commits {
		gen := strings.TrimPrefix(t.src.Name, CommitPrefix)
		if why, ok := held[gen]; ok {
			r.issue(&r.res.Damaged, t.src.Name, "held back: "+why+" was not copied, and a commit must not arrive before its generation's objects")
			continue
		}
		ready = append(ready, t)
	}
	if err := r.run(ctx, ready); err != nil {
		return r.result(), err
	}
	res = r.result()
	return res, res.err(src, dst)
}

// AlwaysCompared reports whether sync compares an object present on both
// sides by content even without Check: the small objects that decide what
// a generation is and who belongs to the mesh (commits, manifests, the mesh
// keys, repository indexes and enrolment records). Two different commits
// of one generation usually have the same size, so a sync that compared
// sizes alone would merge two histories without a word.
func AlwaysCompared(name string) bool {
	for _, p := range []string{CommitPrefix, ManifestPrefix, MeshKeysName, RepoIndexPrefix, EnrolPrefix} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// syncPlan is what a sync found to do, in order of name: the objects on
// both sides to compare, the objects only the source has (commits apart),
// and how many objects on both sides were shown equal already.
type syncPlan struct {
	compares, copies, commits []syncTask
	skipped                   int
}

// both plans an object present on both sides: equal sizes show it equal,
// unless its content must be compared (Check, AlwaysCompared).
func (p *syncPlan) both(s Info, dstSize int64, dstETag string, opts SyncOptions) {
	if dstSize != s.Size || opts.Check || AlwaysCompared(s.Name) {
		p.compares = append(p.compares, syncTask{src: s, isCompare: true, dstSize: dstSize, dstETag: dstETag})
		return
	}
	p.skipped++
}

// srcOnly plans an object the destination lacks.
func (p *syncPlan) srcOnly(s Info) {
	if strings.HasPrefix(s.Name, CommitPrefix) {
		p.commits = append(p.commits, syncTask{src: s})
		return
	}
	p.copies = append(p.copies, syncTask{src: s})
}

// add appends the plan of objects that come after p's by name.
func (p *syncPlan) add(q *syncPlan) {
	p.compares = append(p.compares, q.compares...)
	p.copies = append(p.copies, q.copies...)
	p.commits = append(p.commits, q.commits...)
	p.skipped += q.skipped
}

// matchListed plans a sync from both spools' listings, merged by name.
func (p *syncPlan) matchListed(ctx context.Context, src, dst Spool, opts SyncOptions) error {
	srcObjs, dstObjs, err := listBoth(ctx, src, dst)
	if err != nil {
		return err
	}
	j := 0
	for _, s := range srcObjs {
		for j < len(dstObjs) && dstObjs[j].Name < s.Name {
			j++ // only at the destination: nothing to do
		}
		if j < len(dstObjs) && dstObjs[j].Name == s.Name {
			p.both(s, dstObjs[j].Size, dstObjs[j].ETag, opts)
			j++
			continue
		}
		p.srcOnly(s)
	}
	return nil
}

// result returns the result so far, issues in order of name.
func (r *syncRun) result() SyncResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	byName := func(a, b SyncIssue) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(r.res.Conflicts, byName)
	slices.SortFunc(r.res.Damaged, byName)
	return r.res
}

// err sums up the objects a sync could not bring into agreement.
func (res *SyncResult) err(src, dst Spool) error {
	var parts []string
	var errs []error
	if n := len(res.Conflicts); n > 0 {
		parts = append(parts, plural(n, "object differs", "objects differ")+" between the two spools")
		errs = append(errs, ErrConflict)
	}
	if n := len(res.Damaged); n > 0 {
		parts = append(parts, plural(n, "damaged object was", "damaged objects were")+" not copied")
		errs = append(errs, ErrDamaged)
	}
	if len(parts) == 0 {
		return nil
	}
	return &syncError{msg: fmt.Sprintf("sync %s to %s: %s", src, dst, strings.Join(parts, ", and ")), errs: errs}
}

type syncError struct {
	msg  string
	errs []error
}

func (e *syncError) Error() string   { return e.msg }
func (e *syncError) Unwrap() []error { return e.errs }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// listBoth lists both spools at once.
func listBoth(ctx context.Context, src, dst Spool) (srcObjs, dstObjs []Info, err error) {
	var wg sync.WaitGroup
	var dstErr error
	wg.Go(func() { dstObjs, dstErr = listAll(ctx, dst) })
	srcObjs, err = listAll(ctx, src)
	wg.Wait()
	return srcObjs, dstObjs, cmp.Or(err, dstErr)
}

func listAll(ctx context.Context, sp Spool) ([]Info, error) {
	var out []Info
	err := sp.List(ctx, "", func(i Info) error {
		out = append(out, i)
		return nil
	})
	// The merge needs names in order; every backend lists them so, but
	// sorting an already sorted slice costs one pass.
	if !slices.IsSortedFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) }) {
		slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, err
}

// syncTask is one object to copy, or (isCompare) to compare with the
// destination's object of dstSize bytes.
type syncTask struct {
	src       Info
	isCompare bool
	dstSize   int64
	dstETag   string
}

// syncRun is the state of one Sync shared by its workers.
type syncRun struct {
	src, dst Spool
	opts     SyncOptions

	mu    sync.Mutex
	res   SyncResult
	done  int
	total int
}

// run handles tasks with the configured number of workers and returns the
// first error that is not about one object.
func (r *syncRun) run(ctx context.Context, tasks []syncTask) error {
	if len(tasks) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan syncTask)
	var wg sync.WaitGroup
	for range min(r.opts.Workers, len(tasks)) {
		wg.Go(func() {
			for t := range next {
				if err := r.handle(ctx, t); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for _, t := range tasks {
		select {
		case next <- t:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

func (r *syncRun) handle(ctx context.Context, t syncTask) error {
	if t.isCompare {
		return r.compare(ctx, t)
	}
	return r.copy(ctx, t.src)
}

// copy copies one object the destination lacks.
func (r *syncRun) copy(ctx context.Context, obj Info) error {
	data, err := r.src.Get(ctx, obj.Name, r.opts.MaxObject)
	switch {
	case errors.Is(err, ErrNotFound):
		r.progress(obj.Name) // removed by gc since the listing
		return nil
	case errors.Is(err, ErrTooLarge):
		r.issue(&r.res.Damaged, obj.Name, fmt.Sprintf("%d bytes, more than the %d an object may have", obj.Size, r.opts.MaxObject))
		return nil
	case err != nil:
		return err
	}
	if int64(len(data)) != obj.Size {
		// Objects never change: one that does is being written in
		// place, as cp does on a USB stick, and is not whole yet.
		r.issue(&r.res.Damaged, obj.Name, fmt.Sprintf("listed with %d bytes, read %d: it changed while being copied", obj.Size, len(data)))
		return nil
	}
	if r.opts.Validate != nil {
		if err := r.opts.Validate(obj.Name, data); err != nil {
			r.issue(&r.res.Damaged, obj.Name, err.Error())
			return nil
		}
	}
	if r.opts.DryRun {
		r.copied(obj.Name, len(data))
		return nil
	}
	if err := r.dst.Put(ctx, obj.Name, data); err != nil {
		if errors.Is(err, ErrConflict) {
			// Written at the destination since the listing, with
			// other bytes.
			r.conflict(ctx, obj.Name, data)
			return nil
		}
		return err
	}
	// Read back what the destination now holds: the copy counts only if
	// it is the bytes that were read.
	got, err := r.dst.Get(ctx, obj.Name, int64(len(data))+1)
	if err != nil {
		return fmt.Errorf("sync: verify %s after copying it to %s: %w", obj.Name, r.dst, err)
	}
	if len(got) != len(data) || sha256.Sum256(got) != sha256.Sum256(data) {
		return fmt.Errorf("sync: verify %s after copying it to %s: it holds %d bytes (sha256 %s), not the %d read from %s (sha256 %s)",
			obj.Name, r.dst, len(got), shortSum(got), len(data), r.src, shortSum(data))
	}
	r.copied(obj.Name, len(data))
	return nil
}

// compare reads an object present on both sides and reports a conflict if
// the bytes differ.
func (r *syncRun) compare(ctx context.Context, t syncTask) error {
	name := t.src.Name
	if t.dstSize == t.src.Size && !r.opts.Check && r.sameByETag(ctx, t) {
		r.mu.Lock()
		r.res.Skipped++
		r.mu.Unlock()
		r.progress(name)
		return nil
	}
	data, err := r.src.Get(ctx, name, r.opts.MaxObject)
	switch {
	case errors.Is(err, ErrNotFound):
		r.progress(name) // removed by gc since the listing
		return nil
	case errors.Is(err, ErrTooLarge):
		r.issue(&r.res.Damaged, name, fmt.Sprintf("%d bytes, more than the %d an object may have", t.src.Size, r.opts.MaxObject))
		return nil
	case err != nil:
		return err
	}
	if t.dstSize == t.src.Size {
		other, err := r.dst.Get(ctx, name, r.opts.MaxObject)
		switch {
		case errors.Is(err, ErrNotFound):
			r.progress(name) // removed since the listing; the next sync copies it
			return nil
		case err != nil && !errors.Is(err, ErrTooLarge):
			return err
		case err == nil && bytes.Equal(data, other):
			r.mu.Lock()
			r.res.Skipped++
			r.mu.Unlock()
			r.progress(name)
			return nil
		}
	}
	r.conflict(ctx, name, data)
	return nil
}

// sameByETag reports whether the ETags the listings gave show that both
// copies of an object have the same bytes, without reading the object
// from a store that charges for it: equal tags on both sides, or one
// side's tag the MD5 of the other side's bytes read where they cost
// nothing (a directory). S3 makes an object's ETag the MD5 of its bytes
// unless it was uploaded in parts or encrypted with a key of the store's;
// any tag that does not match is no proof of a difference, and the copies
// are then compared by content as before.
func (r *syncRun) sameByETag(ctx context.Context, t syncTask) bool {
	s, d := t.src.ETag, t.dstETag
	switch {
	case s != "" && d != "":
		return s == d
	case s != "" && isMD5(s):
		return md5Of(ctx, r.dst, t.src.Name, t.src.Size) == s
	case d != "" && isMD5(d):
		return md5Of(ctx, r.src, t.src.Name, t.src.Size) == d
	}
	return false
}

// md5Of is the hex MD5 of object name's bytes in sp, or "" when it cannot
// be read.
func md5Of(ctx context.Context, sp Spool, name string, size int64) string {
	data, err := sp.Get(ctx, name, size)
	if err != nil {
		return ""
	}
	sum := md5.Sum(data)
	return hex.EncodeToString(sum[:])
}

func isMD5(tag string) bool {
	if len(tag) != 2*md5.Size {
		return false
	}
	_, err := hex.DecodeString(tag)
	return err == nil
}

// conflict records that name holds other bytes at the destination than
// data, saying which copy fails Validate, if one does.
func (r *syncRun) conflict(ctx context.Context, name string, data []byte) {
	other, err := r.dst.Get(ctx, name, r.opts.MaxObject)
	detail := fmt.Sprintf("%s has %d bytes (sha256 %s)", r.src, len(data), shortSum(data))
	if err != nil {
		detail += fmt.Sprintf(", %s has other bytes (%v)", r.dst, err)
	} else {
		detail += fmt.Sprintf(", %s has %d bytes (sha256 %s)", r.dst, len(other), shortSum(other))
	}
	if v := r.opts.Validate; v != nil {
		if err := v(name, data); err != nil {
			detail += fmt.Sprintf("; the copy in %s is damaged: %v", r.src, err)
		}
		if err == nil {
			if err := v(name, other); err != nil {
				detail += fmt.Sprintf("; the copy in %s is damaged: %v", r.dst, err)
			}
		}
	}
	r.issue(&r.res.Conflicts, name, detail)
}

func shortSum(b []byte) string {
	s := sha256.Sum256(b)
	return fmt.Sprintf("%x", s[:6])
}

func (r *syncRun) issue(list *[]SyncIssue, name, detail string) {
	r.mu.Lock()
	*list = append(*list, SyncIssue{Name: name, Detail: detail})
	r.mu.Unlock()
	r.progress(name)
}

func (r *syncRun) copied(name string, n int) {
	r.mu.Lock()
	r.res.Copied++
	r.res.Bytes += int64(n)
	r.mu.Unlock()
	r.progress(name)
}

func (r *syncRun) progress(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done++
	if r.opts.Progress != nil {
		r.opts.Progress(SyncProgress{Name: name, Done: r.done, Total: r.total, Bytes: r.res.Bytes})
	}
}

// unfinishedGenerations returns the generations (as their name segment)
// with a decl/ or manifest/ object that conflicts or was not copied, and
// for each one such object.
func (r *syncRun) unfinishedGenerations() map[string]string {
	held := map[string]string{}
	for _, list := range [][]SyncIssue{r.res.Conflicts, r.res.Damaged} {
		for _, is := range list {
			for _, p := range []string{DeclPrefix, ManifestPrefix} {
				rest, ok := strings.CutPrefix(is.Name, p)
				if !ok {
					continue
				}
				gen, _, _ := strings.Cut(rest, "/")
				if _, dup := held[gen]; !dup {
					held[gen] = is.Name
				}
			}
		}
	}
	return held
}
