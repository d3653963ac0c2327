package spool

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/s3client"
	"github.com/muster-tool/muster/internal/workpool"
)

// S3Config says where an S3 spool is and how long to wait for it.
// ParseS3Location builds one from a location; the zero values of the
// tuning fields mean the defaults.
type S3Config struct {
	Bucket string
	// Prefix is the key prefix the objects live under, without leading
	// or trailing "/"; object name N is the key Prefix+"/"+N. Empty means
	// the whole bucket.
	Prefix string
	// Endpoint is the store's host[:port]; empty means AWS S3. A custom
	// endpoint is addressed path-style (http://host/bucket/key), which
	// every S3-compatible store understands.
	Endpoint string
	// Region is the bucket's region; empty means AWS_REGION or
	// AWS_DEFAULT_REGION, else asking the store.
	Region string
	// Insecure talks plain HTTP instead of HTTPS.
	Insecure bool
	// AccessKey and SecretKey (and SessionToken) are the credentials; when
	// AccessKey is empty they are found as the AWS tools find them: the
	// environment, a web identity token, the profile AWS_PROFILE of
	// ~/.aws/config and ~/.aws/credentials (credential_process included),
	// the instance metadata service (see internal/s3client).
	AccessKey, SecretKey, SessionToken string

	// Timeout bounds one request with all its attempts (default 1m):
	// a store that has not answered by then did not answer. Each attempt
	// waits at most a third of it for the store to connect and begin its
	// answer, so a store that accepts connections and says nothing is
	// tried three times.
	Timeout time.Duration
	// Attempts is how many times one request is tried at most within
	// Timeout (default 5).
	Attempts int
	// Backoff is the wait before the second attempt; it doubles for each
	// further one up to MaxBackoff (defaults 200ms and 5s).
	Backoff, MaxBackoff time.Duration
	// PageSize is how many keys one LIST request asks for (default and
	// most stores' maximum: 1000).
	PageSize int
}

// Defaults of S3Config's tuning fields.
const (
	DefaultS3Timeout    = time.Minute
	DefaultS3Attempts   = 5
	DefaultS3Backoff    = 200 * time.Millisecond
	DefaultS3MaxBackoff = 5 * time.Second
	defaultS3PageSize   = 1000
	minS3Timeout        = time.Second
	maxKeyLen           = 1024 // S3's limit on a key, prefix included
)

// ParseS3Location parses
// "s3://bucket/prefix?endpoint=host:port&region=R&tls=false&timeout=1m".
// Every query parameter is optional; one it does not know is a usage error,
// so a misspelt option is not silently ignored.
func ParseS3Location(location string) (S3Config, error) {
	u, err := url.Parse(location)
	if err != nil || u.Scheme != "s3" {
		return S3Config{}, fault.Usagef("spool %s: not an s3:// location (want s3://bucket/prefix?endpoint=host:port)", location)
	}
	if u.User != nil {
		return S3Config{}, fault.WithHint(fault.Usagef("spool %s: credentials do not belong in the location", redact(u)),
			"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or use a profile of ~/.aws/config or ~/.aws/credentials")
	}
	cfg := S3Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if cfg.Bucket == "" {
		return S3Config{}, fault.Usagef("spool %s: no bucket given (want s3://bucket/prefix)", location)
	}
	if err := checkBucketName(cfg.Bucket); err != nil {
		return S3Config{}, fault.Usagef("spool %s: bucket %q: %v", location, cfg.Bucket, err)
	}
	if cfg.Prefix != "" {
		for seg := range strings.SplitSeq(cfg.Prefix, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return S3Config{}, fault.Usagef("spool %s: prefix %q has an empty, \".\" or \"..\" segment", location, cfg.Prefix)
			}
		}
	}
	for key, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch key {
		case "endpoint":
			if v == "" || strings.Contains(v, "/") {
				return S3Config{}, fault.Usagef("spool %s: endpoint %q: want host or host:port", location, v)
			}
			cfg.Endpoint = v
		case "region":
			cfg.Region = v
		case "tls":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return S3Config{}, fault.Usagef("spool %s: tls=%q: want true or false", location, v)
			}
			cfg.Insecure = !b
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d < minS3Timeout {
				return S3Config{}, fault.Usagef("spool %s: timeout=%q: want a duration of at least %v, such as 30s or 2m", location, v, minS3Timeout)
			}
			cfg.Timeout = d
		default:
			return S3Config{}, fault.Usagef("spool %s: unknown parameter %q (known: endpoint, region, tls, timeout)", location, key)
		}
	}
	return cfg, nil
}

// checkBucketName applies the rules every S3 store shares: 3 to 63 bytes
// of lower-case letters, digits, "." and "-", starting and ending with a
// letter or digit.
func checkBucketName(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return errors.New("want 3 to 63 characters")
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("%q is not allowed (use a-z 0-9 . -)", c)
		}
	}
	if first, last := b[0], b[len(b)-1]; first == '.' || first == '-' || last == '.' || last == '-' {
		return errors.New("must start and end with a letter or digit")
	}
	return nil
}

func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// S3 is a spool kept in an S3-compatible object store; see doc.go. It
// fits the protocol client (internal/s3client), wrapped in bounded
// retries (s3Retry), to the Spool interface. It is safe for concurrent
// use.
type S3 struct {
	cfg      S3Config
	store    s3Requests
	endpoint string // for messages and hints
	base     string // the key prefix of every object: Prefix+"/", or ""
	name     string // for messages
	// puts holds a token for each PUT of a batch in flight.
	puts chan struct{}
	// noBatchDelete is set once the store has said it does not know
	// multi-object deletes.
	noBatchDelete atomic.Bool
}

// OpenS3 opens the S3 spool cfg describes. It does not contact the store
// or read a file: a store that is down shows as unavailable on first use,
// which a command run from a timer treats as a temporary failure.
func OpenS3(cfg S3Config) (*S3, error) {
	if err := checkBucketName(cfg.Bucket); err != nil {
		return nil, fault.Usagef("s3 spool: bucket %q: %v", cfg.Bucket, err)
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultS3Timeout
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultS3Attempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultS3Backoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultS3MaxBackoff
	}
	if cfg.PageSize <= 0 || cfg.PageSize > defaultS3PageSize {
		cfg.PageSize = defaultS3PageSize
	}
	if cfg.Region == "" {
		cfg.Region = cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))
	}
	client, err := s3client.New(s3client.Config{
		Bucket:        cfg.Bucket,
		Endpoint:      cfg.Endpoint,
		Region:        cfg.Region,
		Insecure:      cfg.Insecure,
		AccessKey:     cfg.AccessKey,
		SecretKey:     cfg.SecretKey,
		SessionToken:  cfg.SessionToken,
		AnswerTimeout: cfg.Timeout / 3,
	})
	if err != nil {
		return nil, fault.Usagef("s3 spool s3://%s/%s: endpoint %q: %v", cfg.Bucket, cfg.Prefix, cfg.Endpoint, err)
	}
	s := &S3{
		cfg:      cfg,
		store:    &s3Retry{next: client, budget: cfg.Timeout, attempts: cfg.Attempts, backoff: cfg.Backoff, maxBackoff: cfg.MaxBackoff},
		endpoint: client.Endpoint(),
		puts:     make(chan struct{}, s3BatchPuts),
	}
	if cfg.Prefix != "" {
		s.base = cfg.Prefix + "/"
	}
	s.name = "s3://" + cfg.Bucket + "/" + cfg.Prefix + " at " + s.endpoint
	return s, nil
}

// String names the spool in messages: "s3://bucket/prefix at endpoint".
func (s *S3) String() string { return s.name }

// Config returns the configuration the spool was opened with, defaults
// filled in.
func (s *S3) Config() S3Config { return s.cfg }

func (s *S3) key(name string) string { return s.base + name }

// s3BatchPuts bounds the PUTs that PutMany and PutManyNew have in flight
// on one S3 spool, however many batches are being put at once: a store
// answers each PUT on its own, so sending them one after another only
// adds round trips, and more at once than the HTTP client keeps
// connections open for (s3client.IdleConns) would open and close a
// connection for the PUTs past it.
const s3BatchPuts = 32

// putMany sends the batch's conditional PUTs at most s3BatchPuts at a
// time on the spool, each with Put's guarantees; the first error stops
// new ones.
func (s *S3) putMany(ctx context.Context, objs []Object) error {
	return s.putBatch(ctx, objs, s.Put)
}

// putManyNew is putMany with PutNew.
func (s *S3) putManyNew(ctx context.Context, objs []Object) error {
	return s.putBatch(ctx, objs, s.PutNew)
}

// putBatch calls put for each object, with a token of s.puts held for
// each call in flight.
func (s *S3) putBatch(ctx context.Context, objs []Object, put func(ctx context.Context, name string, data []byte) error) error {
	return workpool.Run(ctx, len(objs), cap(s.puts), func(i int) error {
		select {
		case s.puts <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-s.puts }()
		return put(ctx, objs[i].Name, objs[i].Data)
	})
}

// Put creates object name with data unless it exists; see Spool.Put.
//
// It asks the store first (HEAD) and compares bytes if the object exists,
// so re-putting an object costs no upload. Otherwise it PUTs with
// "If-None-Match: *": the store creates the object only if the key is
// free, so of two writers racing for a name exactly one wins and the other
// gets 412 Precondition Failed and compares bytes. A store that ignores
// If-None-Match leaves a window between the HEAD and the PUT in which a
// second writer can replace the object (see doc.go).
func (s *S3) Put(ctx context.Context, name string, data []byte) error {
	if err := s.checkPut(ctx, name); err != nil {
		return err
	}
	_, err := s.store.Head(ctx, s.key(name))
	if err == nil {
		return s.compare(ctx, name, data)
	}
	if err := s.failed(ctx, "put", name, err); !errors.Is(err, ErrNotFound) {
		return err
	}
	err = s.store.PutIfAbsent(ctx, s.key(name), data)
	if errors.Is(err, s3client.ErrExists) {
		return s.compare(ctx, name, data)
	}
	return s.failed(ctx, "put", name, err)
}

// PutNew is Put for a name no other object can have taken, such as a
// report's (node, generation and a sequence number of nanoseconds): it
// sends the conditional PUT without asking first, which saves the HEAD
// that Put spends so that re-putting an object costs no upload. Its
// guarantees are Put's on a store that honours If-None-Match (AWS S3,
// Ceph RGW, MinIO, versitygw); on one that does not, a PUT of a name that
// exists replaces the object, which for a name of one writer's making
// can only be that writer sending the same bytes again.
func (s *S3) PutNew(ctx context.Context, name string, data []byte) error {
	if err := s.checkPut(ctx, name); err != nil {
		return err
	}
	err := s.store.PutIfAbsent(ctx, s.key(name), data)
	if errors.Is(err, s3client.ErrExists) {
		return s.compare(ctx, name, data)
	}
	return s.failed(ctx, "put", name, err)
}

// checkPut is check for a put, which also refuses a key longer than S3
// allows.
func (s *S3) checkPut(ctx context.Context, name string) error {
	if err := s.check(ctx, "put", name); err != nil {
		return err
	}
	if len(s.key(name)) > maxKeyLen {
		return fmt.Errorf("%w %q: with the spool's prefix %q the key is %d bytes, and S3 allows %d", ErrBadName, name, s.cfg.Prefix, len(s.key(name)), maxKeyLen)
	}
	return nil
}

// check refuses a bad name, and a request whose context is done before it
// starts.
func (s *S3) check(ctx context.Context, op, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: %s %s: %w", s, op, name, err)
	}
	return nil
}

// compare checks the existing object name against data: nil if the bytes
// are the same, an error wrapping ErrConflict if not.
func (s *S3) compare(ctx context.Context, name string, data []byte) error {
	got, err := s.Get(ctx, name, int64(len(data)))
	switch {
	case errors.Is(err, ErrTooLarge):
		return fmt.Errorf("spool %s: %s: %w", s, name, ErrConflict)
	case errors.Is(err, ErrNotFound):
		// Removed by gc between our PUT and this GET: the name was
		// taken, so this Put did not happen.
		return fmt.Errorf("spool %s: put %s: the object was removed while being compared; try again", s, name)
	case err != nil:
		return err
	case !bytes.Equal(got, data):
		return fmt.Errorf("spool %s: %s: %w", s, name, ErrConflict)
	}
	return nil
}

// Get returns object name's bytes; see Spool.Get. An object larger than
// max is refused from its Content-Length before its body is read, and the
// body is read no further than max+1 bytes whatever the store claims.
func (s *S3) Get(ctx context.Context, name string, max int64) ([]byte, error) {
	if err := s.check(ctx, "get", name); err != nil {
		return nil, err
	}
	if max <= 0 {
		max = DefaultMaxObject
	}
	data, err := s.store.Get(ctx, s.key(name), max)
	var tooLarge *s3client.TooLargeError
	if errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("spool %s: %s: %w (%d bytes, limit %d)", s, name, ErrTooLarge, tooLarge.Size, max)
	}
	if err != nil {
		return nil, s.failed(ctx, "get", name, err)
	}
	return data, nil
}

// Stat returns object name's size; see Spool.Stat.
func (s *S3) Stat(ctx context.Context, name string) (Info, error) {
	obj, err := s.head(ctx, "stat", name)
	if err != nil {
		return Info{}, err
	}
	return Info{Name: name, Size: obj.Size}, nil
}

// head asks for object name's size and time (HEAD).
func (s *S3) head(ctx context.Context, op, name string) (s3client.Object, error) {
	if err := s.check(ctx, op, name); err != nil {
		return s3client.Object{}, err
	}
	obj, err := s.store.Head(ctx, s.key(name))
	if err != nil {
		return s3client.Object{}, s.failed(ctx, op, name, err)
	}
	return obj, nil
}

// Delete removes object name; see Spool.Delete.
func (s *S3) Delete(ctx context.Context, name string) error {
	// HEAD first: some stores that keep objects as files refuse to
	// delete a key that is a directory of other objects, and a missing
	// object is no error here.
	if _, err := s.head(ctx, "delete", name); errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	err := s.failed(ctx, "delete", name, s.store.Delete(ctx, s.key(name)))
	if errors.Is(err, ErrNotFound) {
		return nil // removed since the HEAD, as this Delete would have
	}
	return err
}

// s3BatchDeletes bounds the multi-object deletes deleteMany has in flight:
// each names up to s3client.MaxDeleteKeys keys, which the store removes
// one by one, so a few at once keep it busy.
const s3BatchDeletes = 4

// deleteMany removes the named objects with one request per
// s3client.MaxDeleteKeys of them, instead of a HEAD and a DELETE each. A
// key the store would not remove in a batch is tried again with Delete,
// which asks first whether it is an object at all and says why it fails.
// A store that does not know multi-object deletes (it answers
// NotImplemented) gets one Delete per object from then on.
func (s *S3) deleteMany(ctx context.Context, names []string, gone []bool) error {
	per := s3client.MaxDeleteKeys
	return workpool.Run(ctx, (len(names)+per-1)/per, s3BatchDeletes, func(c int) error {
		lo, hi := c*per, min(len(names), (c+1)*per)
		if !s.noBatchDelete.Load() {
			keys := make([]string, hi-lo)
			for i := range keys {
				keys[i] = s.key(names[lo+i])
			}
			failed, err := s.store.DeleteMany(ctx, keys)
			switch {
			case err == nil:
				left := make(map[string]bool, len(failed))
				for _, f := range failed {
					left[f.Key] = true
				}
				for i := lo; i < hi; i++ {
					gone[i] = !left[keys[i-lo]]
				}
			case s3client.Code(err) == "NotImplemented":
				s.noBatchDelete.Store(true)
			default:
				return s.failed(ctx, "delete", fmt.Sprintf("%s and %d more", names[lo], hi-lo-1), err)
			}
		}
		// The rest one by one, as many in flight in all as DeleteMany
		// has where a backend knows no batch.
		return deleteEach(ctx, s, names[lo:hi], gone[lo:hi], deletesInFlight/s3BatchDeletes)
	})
}

// List calls fn for each object whose name starts with prefix, in lexical
// order; see Spool.List. It pages through the store's listing (PageSize
// keys per request, each page tried as one request). Keys that are no
// valid object name (folder markers, anything else in the bucket) are not
// shown. A key out of order (at or before the one before it) or outside
// the prefix asked for is an error: the listing cannot be trusted, and
// skipping such a key could hide an object or show one twice.
func (s *S3) List(ctx context.Context, prefix string, fn func(Info) error) error {
	return s.ListAfter(ctx, prefix, "", fn)
}

// ListAfter is List that leaves out the names at or before after, which
// the store does not send (StartAfter): a listing past what a caller
// knows costs one request per PageSize newer objects, however many came
// before. Each object's ETag comes with it.
//
// A listing below a prefix whose objects are filed under ids (see
// splitBounds) that does not end with its first page lists the rest in
// ranges at once, one per first digit of the ids, and gives the names in
// order as before: what the listing costs in time is then the slowest
// range's pages rather than all of them one after another, for about one
// request more per range.
func (s *S3) ListAfter(ctx context.Context, prefix, after string, fn func(Info) error) error {
	if err := ValidPrefix(prefix); err != nil {
		return err
	}
	op := "list " + cmp.Or(prefix, "/")
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: %s: %w", s, op, err)
	}
	q := s3client.ListQuery{Prefix: s.base + prefix, Max: s.cfg.PageSize}
	if after != "" {
		q.StartAfter = s.base + after
	}
	last := ""
	// give checks one listed key and hands its object to fn.
	give := func(k s3client.Key) error {
		switch {
		case last != "" && k.Key <= last:
			return fault.WithHint(fmt.Errorf("spool %s: %s: the store listed key %q after %q, out of key order", s, op, k.Key, last),
				"S3 lists keys in byte order; a store that does not cannot hold a spool")
		case !strings.HasPrefix(k.Key, q.Prefix):
			return fmt.Errorf("spool %s: %s: the store listed key %q, which does not start with %q", s, op, k.Key, q.Prefix)
		}
		last = k.Key
		name := strings.TrimPrefix(k.Key, s.base)
		if ValidName(name) != nil || after != "" && name <= after {
			// The second: a store that does not know StartAfter
			// lists from the start.
			return nil
		}
		return fn(Info{Name: name, Size: k.Size, ETag: k.ETag, ModTime: k.ModTime})
	}
	for first := true; ; first = false {
		page, err := s.store.List(ctx, q)
		if err != nil {
			return s.failed(ctx, op, "", err)
		}
		for _, k := range page.Keys {
			if err := give(k); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		q.Token = page.Next
		if !first {
			continue
		}
		if bounds := splitBounds(prefix, strings.TrimPrefix(last, s.base)); len(bounds) > 0 {
			if done, err := s.listRanges(ctx, op, q.Prefix, last, bounds, give); done || err != nil {
				return err
			}
			// The store ignores StartAfter: the rest one page after
			// another, from where the first page ended.
		}
	}
}

// subdirs asks the store for the common prefixes below prefix with the
// delimiter "/"; see Subdirs. A store that ignores the delimiter lists
// every key, and the directories are taken from them.
func (s *S3) subdirs(ctx context.Context, prefix string) ([]string, error) {
	op := "list " + prefix
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("spool %s: %s: %w", s, op, err)
	}
	q := s3client.ListQuery{Prefix: s.base + prefix, Max: s.cfg.PageSize, Delimiter: "/"}
	seen := map[string]bool{}
	var dirs []string
	add := func(key string) {
		dir, ok := subdirOf(q.Prefix, key)
		if !ok || seen[dir] {
			return
		}
		if name := strings.TrimPrefix(dir, s.base); ValidPrefix(name) == nil {
			seen[dir] = true
			dirs = append(dirs, name)
		}
	}
	for {
		page, err := s.store.List(ctx, q)
		if err != nil {
			return nil, s.failed(ctx, op, "", err)
		}
		for _, p := range page.Prefixes {
			add(p)
		}
		for _, k := range page.Keys {
			add(k.Key)
		}
		if page.Next == "" {
			break
		}
		q.Token = page.Next
	}
	slices.Sort(dirs)
	return dirs, nil
}

// idKeyed are the prefixes whose objects are named by an id first (a node
// id, a token id: lowercase hex), so that the first digit of the id
// splits a long listing into ranges of about equal size.
var idKeyed = []string{EnrolTokenPrefix, EnrolJoinPrefix, EnrolAdmitPrefix, EnrolRevokePrefix, EnrolLabelPrefix, BriefPrefix, ReportPrefix}

// splitBounds returns the names at which to split the rest of a listing of
// prefix that has reached name last: prefix followed by each hex digit but
// 0, those that sort after last. None for a prefix not in idKeyed. Any
// name below prefix falls in exactly one range, whatever it starts with.
func splitBounds(prefix, last string) []string {
	if !listInRanges || !slices.Contains(idKeyed, prefix) {
		return nil
	}
	var bounds []string
	for _, d := range "123456789abcdef" {
		if b := prefix + string(d); b > last {
			bounds = append(bounds, b)
		}
	}
	return bounds
}

// listInRanges is false only in a benchmark that compares listing page
// after page.
var listInRanges = true

// listAhead is how many pages a range listed at once may hold before the
// ranges before it are given: a range waits beyond that. 64 pages a range
// lets a listing of a million keys go at the pace of its slowest range,
// and bounds what it holds to about 130 MB.
const listAhead = 64

// errIgnoresStartAfter is a range's listing that began at or before its
// lower bound: the store does not know StartAfter.
var errIgnoresStartAfter = errors.New("the store ignores StartAfter")

// listRanges lists the keys starting with keyPrefix after key last in
// ranges split at the names bounds, at once, and hands each key to give in
// order. The first range holds the keys after last up to bounds[0], each
// next one those after its bound up to the next, the last one all after
// the last bound. done is false, with no error, when the store turned out
// not to know StartAfter before any key was given: the caller lists the
// rest one page after another. A store's error is the spool's, as failed
// makes it; give's is returned as it is.
func (s *S3) listRanges(ctx context.Context, op, keyPrefix, last string, bounds []string, give func(s3client.Key) error) (done bool, err error) {
	type result struct {
		keys []s3client.Key
		err  error
	}
	outer := ctx
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	lows := []string{last} // each range's lower bound, a key
	for _, b := range bounds {
		lows = append(lows, s.base+b)
	}
	ranges := make([]chan result, len(lows))
	for i, lo := range lows {
		ch := make(chan result, listAhead)
		ranges[i] = ch
		hi := "" // none: the last range
		if i+1 < len(lows) {
			hi = lows[i+1]
		}
		wg.Go(func() {
			defer close(ch)
			send := func(r result) bool {
				select {
				case ch <- r:
					return true
				case <-ctx.Done():
					return false
				}
			}
			rq := s3client.ListQuery{Prefix: keyPrefix, StartAfter: lo, Max: s.cfg.PageSize}
			for first := true; ; first = false {
				page, err := s.store.List(ctx, rq)
				if ctx.Err() != nil {
					return // the listing stops, or the caller's context ended
				}
				if err != nil {
					send(result{err: err})
					return
				}
				keys := page.Keys
				if first && len(keys) > 0 && keys[0].Key <= lo {
					send(result{err: errIgnoresStartAfter})
					return
				}
				end := page.Next == ""
				if hi != "" {
					if j := slices.IndexFunc(keys, func(k s3client.Key) bool { return k.Key > hi }); j >= 0 {
						keys, end = keys[:j], true
					}
				}
				if !send(result{keys: keys}) || end {
					return
				}
				rq.Token = page.Next
			}
		})
	}
	for _, ch := range ranges {
		for r := range ch {
			if errors.Is(r.err, errIgnoresStartAfter) {
				return false, nil
			}
			if r.err != nil {
				return true, s.failed(outer, op, "", r.err)
			}
			for _, k := range r.keys {
				if err := give(k); err != nil {
					return true, err
				}
			}
		}
		if err := outer.Err(); err != nil {
			// A range stopped before its end.
			return true, fmt.Errorf("spool %s: %s: %w", s, op, err)
		}
	}
	return true, nil
}

// failed turns the error of a request for object name (none for a
// listing) into the spool's: nil stays nil, a missing object is
// ErrNotFound, a store that keeps objects as files refusing a name is
// ErrConflict, and anything else names the store, the operation, the
// object and how often it was tried, classed as the class table in doc.go
// says.
func (s *S3) failed(ctx context.Context, op, name string, err error) error {
	if err == nil {
		return nil
	}
	switch s3client.Code(err) {
	case "NoSuchKey":
		return fmt.Errorf("spool %s: %s: %w", s, name, ErrNotFound)
	case "ObjectParentIsFile":
		// Stores that keep objects as files cannot hold "a/b" and
		// "a/b/c" at once; neither can the directory backend.
		return fmt.Errorf("spool %s: %s: %w: a name before it is an object, so no name can continue it with /", s, name, ErrConflict)
	case "ExistingObjectIsDirectory":
		return fmt.Errorf("spool %s: %s: %w: the name holds other objects", s, name, ErrConflict)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("spool %s: %s: %w", s, what(op, name), ctx.Err())
	}
	t := triesOf(err)
	switch {
	case t.noAnswer:
		return fault.WithHint(fault.New(fault.Temporary, &unavailableError{
			fmt.Errorf("spool %s: %s: the store did not answer within %v (%s)", s, what(op, name), s.cfg.Timeout, tries(t.attempts))}),
			"check that the object store at "+s.endpoint+" is running and reachable; muster tries again on its next run (the spool location's timeout= sets how long to wait)")
	case s3client.Retryable(err):
		return fault.WithHint(fault.New(fault.Temporary, &unavailableError{
			fmt.Errorf("spool %s: %s: %s (gave up after %s)", s, what(op, name), s3client.Describe(err), tries(t.attempts))}),
			"check that the object store at "+s.endpoint+" is running and reachable; muster tries again on its next run")
	}
	wrapped := fmt.Errorf("spool %s: %s: %s (%s)", s, what(op, name), s3client.Describe(err), tries(t.attempts))
	// Refused or missing credentials and a missing bucket are classed
	// temporary, as the directory backend does for permissions and a
	// missing directory: they are fixed outside muster, and a timer
	// should try again rather than report a failure.
	var hint string
	var noCreds *s3client.CredentialsError
	switch c := s3client.Code(err); {
	case errors.As(err, &noCreds):
		hint = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, choose a profile of ~/.aws/config or ~/.aws/credentials with AWS_PROFILE, or give the host an instance role or a web identity"
	case c == "NoSuchBucket":
		hint = "create bucket " + s.cfg.Bucket + " or check the location"
	case c == "AccessDenied" || c == "InvalidAccessKeyId" || c == "SignatureDoesNotMatch" ||
		c == "InvalidToken" || c == "ExpiredToken" || c == "XAdminUserNotFound" ||
		s3client.Status(err) == 403:
		hint = "check the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE, the host's role) and that they may use bucket " + s.cfg.Bucket
	default:
		return wrapped
	}
	return fault.WithHint(fault.New(fault.Temporary, &unavailableError{wrapped}), hint)
}

// what names the operation and object in a message.
func what(op, name string) string {
	if name == "" {
		return op
	}
	return op + " " + name
}

func tries(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}
