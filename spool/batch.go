package spool

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/workpool"
)

// Object is a name and its bytes, for PutMany.
type Object struct {
	Name string
	Data []byte
}

// batchPutter is implemented by backends that write many objects more
// cheaply together than one by one.
type batchPutter interface {
	putMany(ctx context.Context, objs []Object) error
}

// PutMany puts every object with Put's guarantees, each object on its own
// (create-if-absent, atomic, same bytes a no-op, different bytes
// ErrConflict). Backends that can, make the whole batch durable with one
// sync instead of one per object (a directory) or send its writes
// concurrently (S3). It stops at the first error; other objects of the
// batch may have been written.
func PutMany(ctx context.Context, sp Spool, objs []Object) error {
	if b, ok := sp.(batchPutter); ok {
		return b.putMany(ctx, objs)
	}
	for _, o := range objs {
		if err := sp.Put(ctx, o.Name, o.Data); err != nil {
			return err
		}
	}
	return nil
}

// newBatchPutter is implemented by backends for which a batch of names
// no other writer uses costs less than PutMany.
type newBatchPutter interface {
	putManyNew(ctx context.Context, objs []Object) error
}

// PutManyNew is PutMany for names only this writer uses, such as the
// bundles of one declare run (their names hold its run ID): each object
// has Put's guarantees, and a backend that can spares what Put spends on
// names that may be taken (S3: a HEAD per object, see S3.PutNew).
func PutManyNew(ctx context.Context, sp Spool, objs []Object) error {
	if b, ok := sp.(newBatchPutter); ok {
		return b.putManyNew(ctx, objs)
	}
	return PutMany(ctx, sp, objs)
}

// newPutter is implemented by backends for which a put that does not ask
// first whether the name is taken costs less (S3: no HEAD).
type newPutter interface {
	PutNew(ctx context.Context, name string, data []byte) error
}

// PutNew puts an object whose name no other object can have taken, such
// as a report's, with Put's guarantees; a backend that can leaves out
// what Put spends on names that may be taken (see S3.PutNew).
func PutNew(ctx context.Context, sp Spool, name string, data []byte) error {
	if np, ok := sp.(newPutter); ok {
		return np.PutNew(ctx, name, data)
	}
	return sp.Put(ctx, name, data)
}

// batchDeleter is implemented by backends that remove many objects more
// cheaply together than one by one.
type batchDeleter interface {
	deleteMany(ctx context.Context, names []string, gone []bool) error
}

// deletesInFlight is how many objects DeleteMany removes at once on a
// backend that removes them one by one: each removal waits on the store
// (a synced directory on a disk, a round trip to a store).
const deletesInFlight = 32

// DeleteMany removes every named object as Delete does (a missing object
// is no error) and returns which are gone: gone[i] is true once names[i]
// is confirmed removed. Backends that can remove many with one request do
// (S3: a thousand objects a request instead of two requests each); the
// others remove several at once. A bad name refuses the whole call before
// anything is removed. It stops at the first error; objects not confirmed
// gone may or may not have been removed.
func DeleteMany(ctx context.Context, sp Spool, names []string) ([]bool, error) {
	gone := make([]bool, len(names))
	for _, name := range names {
		if err := ValidName(name); err != nil {
			return gone, err
		}
	}
	if b, ok := sp.(batchDeleter); ok {
		return gone, b.deleteMany(ctx, names, gone)
	}
	return gone, deleteEach(ctx, sp, names, gone, deletesInFlight)
}

// deleteEach removes with Delete, at most inFlight at once, each named
// object not yet gone, and marks it gone.
func deleteEach(ctx context.Context, sp Spool, names []string, gone []bool, inFlight int) error {
	var left []int
	for i := range names {
		if !gone[i] {
			left = append(left, i)
		}
	}
	return workpool.Run(ctx, len(left), inFlight, func(j int) error {
		if err := sp.Delete(ctx, names[left[j]]); err != nil {
			return err
		}
		gone[left[j]] = true
		return nil
	})
}

// putMany writes every temp file unsynced, makes them all durable with one
// syncfs(2) of the spool's filesystem (or an fsync per file where syncfs
// fails or does not reach the disk), places each under its name exactly as
// Put does, and syncs each directory that gained a name once. A crash at any
// point leaves each object absent or whole, as with Put.
func (d *Dir) putMany(ctx context.Context, objs []Object) error {
	type pending struct {
		name, target, tmp string
		data              []byte
	}
	var todo []pending
	defer func() {
		for _, p := range todo {
			os.Remove(p.tmp)
		}
	}()
	for _, o := range objs {
		if err := ValidName(o.Name); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		target := d.file(o.Name)
		if err := d.compare(o.Name, target, o.Data); !errors.Is(err, errAbsent) {
			if err != nil {
				return err
			}
			continue
		}
		if err := d.mkdirs(o.Name); err != nil {
			return err
		}
		tmp, err := d.writeTempSync(o.Name, o.Data, false)
		if err != nil {
			return err
		}
		todo = append(todo, pending{o.Name, target, tmp, o.Data})
	}
	if len(todo) == 0 {
		return nil
	}
	if err := d.syncfs(); err != nil {
		for _, p := range todo {
			if err := fsyncFile(p.tmp); err != nil {
				return d.fail("put", p.name, err)
			}
		}
	}
	dirs := map[string]bool{}
	for _, p := range todo {
		if err := d.placeIn(p.name, p.tmp, p.target); err != nil {
			if errors.Is(err, fs.ErrExist) {
				if err := d.compare(p.name, p.target, p.data); err != nil {
					return err
				}
				continue
			}
			return d.fail("put", p.name, err)
		}
		dirs[filepath.Dir(p.target)] = true
	}
	for dir := range dirs {
		if err := atomicfile.SyncDir(dir); err != nil {
			return d.fail("put", dir, err)
		}
	}
	return nil
}

// syncfs syncs the spool's filesystem. It refuses FUSE, where syncfs(2)
// succeeds without asking the driver to write anything (the kernel passes
// it on only to virtiofs), so that each file gets an fsync, which reaches
// the driver.
func (d *Dir) syncfs() error {
	f, err := os.Open(d.root)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Type == unix.FUSE_SUPER_MAGIC {
		return errSyncfsFUSE
	}
	return unix.Syncfs(int(f.Fd()))
}

var errSyncfsFUSE = errors.New("syncfs does not reach a FUSE driver")

func fsyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
