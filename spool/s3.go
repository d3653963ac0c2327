package spool

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/workpool"
)

// S3Config says where an S3 spool is and how hard to try reaching it.
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
	// AccessKey is empty they come from AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else from the shared
	// credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials,
	// profile AWS_PROFILE or "default").
	AccessKey, SecretKey, SessionToken string

	// Attempts is how many times one request is tried before the store
	// counts as unavailable (default 5).
	Attempts int
	// Backoff is the wait before the second attempt; it doubles for each
	// further one up to MaxBackoff (defaults 200ms and 5s).
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one attempt of one request (default 2m).
	Timeout time.Duration
	// PageSize is how many keys one LIST request asks for (default and
	// most stores' maximum: 1000).
	PageSize int
}

// Defaults of S3Config's tuning fields.
const (
	DefaultS3Attempts   = 5
	DefaultS3Backoff    = 200 * time.Millisecond
	DefaultS3MaxBackoff = 5 * time.Second
	DefaultS3Timeout    = 2 * time.Minute
	defaultS3PageSize   = 1000
	maxKeyLen           = 1024 // S3's limit on a key, prefix included
	awsEndpoint         = "s3.amazonaws.com"
)

// ParseS3Location parses "s3://bucket/prefix?endpoint=host:port&region=R&tls=false".
// Every query parameter is optional; one it does not know is a usage error,
// so a misspelt option is not silently ignored.
func ParseS3Location(location string) (S3Config, error) {
	u, err := url.Parse(location)
	if err != nil || u.Scheme != "s3" {
		return S3Config{}, fault.Usagef("spool %s: not an s3:// location (want s3://bucket/prefix?endpoint=host:port)", location)
	}
	if u.User != nil {
		return S3Config{}, fault.WithHint(fault.Usagef("spool %s: credentials do not belong in the location", redact(u)),
			"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or use the shared credentials file")
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
		default:
			return S3Config{}, fault.Usagef("spool %s: unknown parameter %q (known: endpoint, region, tls)", location, key)
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

// S3 is a spool kept in an S3-compatible object store; see doc.go.
// It is safe for concurrent use.
type S3 struct {
	cfg    S3Config
	client *s3Client
	base   string // the key prefix of every object: Prefix+"/", or ""
	name   string // for messages
}

// anonymous reports whether no credentials were found, for a hint.
func (s *S3) anonymous() bool { return s.client.credentials().anonymous() }

// OpenS3 opens the S3 spool cfg describes. It does not contact the store:
// a store that is down shows as unavailable on first use, which a command
// run from a timer treats as a temporary failure.
func OpenS3(cfg S3Config) (*S3, error) {
	if err := checkBucketName(cfg.Bucket); err != nil {
		return nil, fault.Usagef("s3 spool: bucket %q: %v", cfg.Bucket, err)
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultS3Attempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultS3Backoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultS3MaxBackoff
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultS3Timeout
	}
	if cfg.PageSize <= 0 || cfg.PageSize > defaultS3PageSize {
		cfg.PageSize = defaultS3PageSize
	}
	if cfg.Region == "" {
		cfg.Region = cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))
	}
	scheme := "https"
	if cfg.Insecure {
		scheme = "http"
	}
	endpoint := cmp.Or(cfg.Endpoint, awsEndpoint)
	host, err := endpointHost(scheme, cfg.Endpoint)
	if err != nil {
		return nil, fault.Usagef("s3 spool s3://%s/%s: endpoint %q: %v", cfg.Bucket, cfg.Prefix, endpoint, err)
	}
	s := &S3{cfg: cfg, client: &s3Client{
		http: &http.Client{
			Transport: s3Transport(cfg),
			// A redirect is S3 naming another region: an error
			// answer to report, not to follow with a signature
			// made for this one.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		scheme:   scheme,
		endpoint: host,
		bucket:   cfg.Bucket,
		region:   cfg.Region,
		cfg:      cfg,
	}}
	if cfg.Prefix != "" {
		s.base = cfg.Prefix + "/"
	}
	s.name = "s3://" + cfg.Bucket + "/" + cfg.Prefix + " at " + endpoint
	return s, nil
}

// endpointHost checks a custom endpoint (host or host:port) and returns
// the host to send requests to: without the port when it is the scheme's
// default, as clients send the Host header and so sign it. Empty (AWS S3)
// stays empty.
func endpointHost(scheme, endpoint string) (string, error) {
	if endpoint == "" {
		return "", nil
	}
	u, err := url.Parse(scheme + "://" + endpoint)
	if err != nil || u.Host != endpoint || u.Hostname() == "" {
		return "", errors.New("want host or host:port")
	}
	if p := u.Port(); scheme == "http" && p == "80" || scheme == "https" && p == "443" {
		h := u.Hostname()
		if strings.Contains(h, ":") {
			h = "[" + h + "]" // an IPv6 address
		}
		return h, nil
	}
	return endpoint, nil
}

// s3Transport is an HTTP transport whose waits are bounded: connecting and
// waiting for response headers never take longer than one attempt may.
func s3Transport(cfg S3Config) http.RoundTripper {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   min(cfg.Timeout, 30*time.Second),
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       time.Minute,
		TLSHandshakeTimeout:   min(cfg.Timeout, 10*time.Second),
		ResponseHeaderTimeout: cfg.Timeout,
		ExpectContinueTimeout: 10 * time.Second,
		// Objects are compressed already; asking for gzip would only
		// make the store's Content-Length disagree with the body.
		DisableCompression: true,
	}
}

// String names the spool in messages: "s3://bucket/prefix at endpoint".
func (s *S3) String() string { return s.name }

// Config returns the configuration the spool was opened with, defaults
// filled in.
func (s *S3) Config() S3Config { return s.cfg }

func (s *S3) key(name string) string { return s.base + name }

// errExists is what a conditional PUT answers when the key is taken.
var errExists = errors.New("exists")

// Put creates object name with data unless it exists; see Spool.Put.
//
// It asks the store first (HEAD) and compares bytes if the object exists,
// so re-putting an object costs no upload. Otherwise it PUTs with
// "If-None-Match: *": the store creates the object only if the key is
// free, so of two writers racing for a name exactly one wins and the other
// gets 412 Precondition Failed and compares bytes. A store that ignores
// If-None-Match leaves a window between the HEAD and the PUT in which a
// second writer can replace the object (see doc.go).
// s3BatchPuts bounds the PUTs PutMany has in flight on one S3 spool: a
// store answers each on its own, so sending them one after another only
// adds round trips.
const s3BatchPuts = 32

// putMany sends the batch's conditional PUTs s3BatchPuts at a time, each
// with Put's guarantees; the first error stops new ones.
func (s *S3) putMany(ctx context.Context, objs []Object) error {
	return workpool.Run(ctx, len(objs), s3BatchPuts, func(i int) error {
		return s.Put(ctx, objs[i].Name, objs[i].Data)
	})
}

func (s *S3) Put(ctx context.Context, name string, data []byte) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: put %s: %w", s, name, err)
	}
	if len(s.key(name)) > maxKeyLen {
		return fmt.Errorf("%w %q: with the spool's prefix %q the key is %d bytes, and S3 allows %d", ErrBadName, name, s.cfg.Prefix, len(s.key(name)), maxKeyLen)
	}
	if _, err := s.head(ctx, "put", name); err == nil {
		return s.compare(ctx, name, data)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	sum := md5.Sum(data)
	put := s3Request{method: http.MethodPut, key: s.key(name), body: data, header: http.Header{
		"Content-Type":  {"application/octet-stream"},
		"Content-Md5":   {base64.StdEncoding.EncodeToString(sum[:])},
		"If-None-Match": {"*"},
	}}
	err := s.do(ctx, "put", name, func(ctx context.Context) error {
		resp, err := s.client.send(ctx, put)
		if code(err) == "PreconditionFailed" || status(err) == http.StatusPreconditionFailed {
			return errExists
		}
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	if errors.Is(err, errExists) {
		return s.compare(ctx, name, data)
	}
	return err
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

// errShortBody is a response body that ended before its Content-Length:
// the connection broke, so the GET is worth trying again.
var errShortBody = errors.New("response body shorter than its Content-Length")

// Get returns object name's bytes; see Spool.Get. An object larger than
// max is refused from its Content-Length before its body is read, and the
// body is read no further than max+1 bytes whatever the store claims.
func (s *S3) Get(ctx context.Context, name string, max int64) ([]byte, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("spool %s: get %s: %w", s, name, err)
	}
	if max <= 0 {
		max = DefaultMaxObject
	}
	var data []byte
	err := s.do(ctx, "get", name, func(ctx context.Context) error {
		resp, err := s.client.send(ctx, s3Request{method: http.MethodGet, key: s.key(name)})
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		size := resp.ContentLength // -1 when the store does not say
		if size > max {
			return s.tooLarge(name, size, max)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
		if err != nil {
			return err
		}
		if int64(len(b)) > max {
			return s.tooLarge(name, int64(len(b)), max)
		}
		if size >= 0 && int64(len(b)) != size {
			return fmt.Errorf("%w (%d of %d bytes)", errShortBody, len(b), size)
		}
		data = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

func (s *S3) tooLarge(name string, size, max int64) error {
	return fmt.Errorf("spool %s: %s: %w (%d bytes, limit %d)", s, name, ErrTooLarge, size, max)
}

// Stat returns object name's size; see Spool.Stat.
func (s *S3) Stat(ctx context.Context, name string) (Info, error) {
	resp, err := s.head(ctx, "stat", name)
	if err != nil {
		return Info{}, err
	}
	return Info{Name: name, Size: resp.ContentLength}, nil
}

// ModTime returns when the store recorded object name, so that gc can
// leave young objects alone.
func (s *S3) ModTime(ctx context.Context, name string) (time.Time, error) {
	resp, err := s.head(ctx, "stat", name)
	if err != nil {
		return time.Time{}, err
	}
	lm := resp.Header.Get("Last-Modified")
	t, err := http.ParseTime(lm)
	if err != nil {
		return time.Time{}, fmt.Errorf("spool %s: stat %s: the store sent no valid Last-Modified (%q)", s, name, lm)
	}
	return t, nil
}

// head asks for object name's headers (HEAD); the answer has no body.
func (s *S3) head(ctx context.Context, op, name string) (*http.Response, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("spool %s: %s %s: %w", s, op, name, err)
	}
	var resp *http.Response
	err := s.do(ctx, op, name, func(ctx context.Context) error {
		var err error
		resp, err = s.client.send(ctx, s3Request{method: http.MethodHead, key: s.key(name)})
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	return resp, err
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
	return s.do(ctx, "delete", name, func(ctx context.Context) error {
		resp, err := s.client.send(ctx, s3Request{method: http.MethodDelete, key: s.key(name)})
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}

// List calls fn for each object whose name starts with prefix, in lexical
// order; see Spool.List. It pages through the store's listing (PageSize
// keys per request); a page that fails is asked for again, starting after
// the last key seen, so a long listing survives a hiccup. Keys that are no
// valid object name (folder markers, anything else in the bucket) are not
// shown.
func (s *S3) List(ctx context.Context, prefix string, fn func(Info) error) error {
	if err := ValidPrefix(prefix); err != nil {
		return err
	}
	op := "list " + cmp.Or(prefix, "/")
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spool %s: %s: %w", s, op, err)
	}
	after, last := "", ""
	delay := s.cfg.Backoff
	for attempt := 1; ; attempt++ {
		progressed, err := s.listFrom(ctx, prefix, after, &last, fn)
		if err == nil {
			return nil
		}
		var fnErr *listFnError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("spool %s: %s: %w", s, op, ctx.Err())
		}
		if progressed {
			attempt, delay = 1, s.cfg.Backoff // a new page: a fresh budget
		}
		if !retryable(err) {
			return s.fail(op, "", attempt, err)
		}
		if attempt >= s.cfg.Attempts {
			return s.unavailable(op, "", attempt, err)
		}
		if err := sleep(ctx, delay); err != nil {
			return fmt.Errorf("spool %s: %s: %w", s, op, err)
		}
		delay = min(2*delay, s.cfg.MaxBackoff)
		after = last
	}
}

// listFnError carries the error of List's callback, which List returns as
// it is.
type listFnError struct{ err error }

func (e *listFnError) Error() string { return e.err.Error() }

// listFrom runs one listing starting after key after, page by page,
// calling fn for each object and recording in *last the last key handed
// to fn. Each page is one request, bounded by the timeout.
func (s *S3) listFrom(ctx context.Context, prefix, after string, last *string, fn func(Info) error) (progressed bool, err error) {
	token := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		page, err := s.client.list(pctx, s.base+prefix, after, token, s.cfg.PageSize)
		cancel()
		if err != nil {
			return progressed, err
		}
		for _, obj := range page.Contents {
			// The store lists in key order; a key at or before the
			// last one seen would be a duplicate from a retried page.
			if *last != "" && obj.Key <= *last {
				continue
			}
			name, ok := strings.CutPrefix(obj.Key, s.base)
			*last = obj.Key
			progressed = true
			if !ok || ValidName(name) != nil {
				continue
			}
			if err := fn(Info{Name: name, Size: obj.Size}); err != nil {
				return progressed, &listFnError{err}
			}
		}
		if !page.IsTruncated {
			return progressed, nil
		}
		token = page.NextContinuationToken
	}
}

// do runs one request with bounded retries: an attempt that fails in a way
// trying again may cure (a 5xx, throttling, a timeout, a broken
// connection) is retried after an exponentially growing, jittered wait.
// When the attempts are used up the error wraps ErrUnavailable and is
// classed temporary.
func (s *S3) do(ctx context.Context, op, name string, attempt func(context.Context) error) error {
	delay := s.cfg.Backoff
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		err := attempt(actx)
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errExists), errors.Is(err, ErrTooLarge):
			return err
		case code(err) == "NoSuchKey":
			return s.notFound(name)
		case code(err) == "ObjectParentIsFile":
			// Stores that keep objects as files cannot hold "a/b" and
			// "a/b/c" at once; neither can the directory backend.
			return fmt.Errorf("spool %s: %s: %w: a name before it is an object, so no name can continue it with /", s, name, ErrConflict)
		case code(err) == "ExistingObjectIsDirectory":
			return fmt.Errorf("spool %s: %s: %w: the name holds other objects", s, name, ErrConflict)
		case ctx.Err() != nil:
			return fmt.Errorf("spool %s: %s %s: %w", s, op, name, ctx.Err())
		case !timedOut && !retryable(err):
			return s.fail(op, name, n, err)
		case n >= s.cfg.Attempts:
			if timedOut {
				err = fmt.Errorf("no answer within %v", s.cfg.Timeout)
			}
			return s.unavailable(op, name, n, err)
		}
		if err := sleep(ctx, delay); err != nil {
			return fmt.Errorf("spool %s: %s %s: %w", s, op, name, err)
		}
		delay = min(2*delay, s.cfg.MaxBackoff)
	}
}

// sleep waits d give or take a quarter, so that many clients retrying at
// once do not hit the store in step.
func sleep(ctx context.Context, d time.Duration) error {
	d = d*3/4 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// code is the S3 error code of err, if the store answered with one.
func code(err error) string {
	var r *s3Error
	if errors.As(err, &r) {
		return r.code
	}
	return ""
}

// status is the HTTP status of err, if the store answered.
func status(err error) int {
	var r *s3Error
	if errors.As(err, &r) {
		return r.status
	}
	return 0
}

// retryable reports whether trying the same request again may succeed.
func retryable(err error) bool {
	var r *s3Error
	if errors.As(err, &r) {
		switch r.code {
		case "SlowDown", "Throttling", "ThrottlingException", "TooManyRequests",
			"RequestTimeout", "InternalError", "ServiceUnavailable",
			"ConditionalRequestConflict", "OperationAborted":
			return true
		}
		return r.status >= 500 || r.status == http.StatusTooManyRequests
	}
	var ne net.Error
	return errors.Is(err, errShortBody) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.As(err, &ne)
}

func (s *S3) notFound(name string) error {
	return fmt.Errorf("spool %s: %s: %w", s, name, ErrNotFound)
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

// fail reports an error that trying again will not cure. Refusals of
// access and a missing bucket are still classed temporary, as the
// directory backend does for permissions and a missing directory: they
// are fixed outside muster, and a timer should try again rather than
// report a failure.
func (s *S3) fail(op, name string, n int, err error) error {
	wrapped := fmt.Errorf("spool %s: %s: %s (%s)", s, what(op, name), describe(err), tries(n))
	var hint string
	switch c := code(err); {
	case c == "NoSuchBucket":
		hint = "create bucket " + s.cfg.Bucket + " or check the location"
	case c == "AccessDenied" || c == "InvalidAccessKeyId" || c == "SignatureDoesNotMatch" ||
		c == "InvalidToken" || c == "ExpiredToken" || c == "XAdminUserNotFound" ||
		status(err) == http.StatusForbidden:
		hint = "check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and that they may use bucket " + s.cfg.Bucket
		if s.anonymous() {
			hint = "no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add them to ~/.aws/credentials"
		}
	default:
		return wrapped
	}
	return fault.WithHint(fault.New(fault.Temporary, &unavailableError{wrapped}), hint)
}

// unavailable reports a request that failed every attempt.
func (s *S3) unavailable(op, name string, n int, err error) error {
	wrapped := fmt.Errorf("spool %s: %s: %s (gave up after %s)", s, what(op, name), describe(err), tries(n))
	host := s.cfg.Endpoint
	if host == "" {
		host = awsEndpoint
	}
	return fault.WithHint(fault.New(fault.Temporary, &unavailableError{wrapped}),
		"check that the object store at "+host+" is running and reachable; muster tries again on its next run")
}

// describe says what went wrong in one line: the store's error code and
// status, or the network error.
func describe(err error) string {
	var r *s3Error
	if errors.As(err, &r) {
		msg := strings.TrimSuffix(r.message, ".")
		if msg != "" {
			msg = ": " + strings.ToLower(msg[:1]) + msg[1:]
		}
		return fmt.Sprintf("%s (HTTP %d)%s", r.code, r.status, msg)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
