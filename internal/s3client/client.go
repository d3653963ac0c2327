// Package s3client is the S3 protocol client behind s3:// spools. It fits
// the AWS SDK for Go (aws-sdk-go-v2) to one bucket: path-style addressing at
// a custom endpoint, virtual-hosted style at AWS S3, the bucket's region
// asked of the store when nobody names it, and credentials found the way
// the AWS tools find them (see credentials.go). It makes the few requests a
// spool needs, each call one HTTP request: retries are the caller's, so
// that the caller decides how long a store may take and can say so. Errors
// the store answered with are *Error; Retryable tells which errors trying
// again may cure.
package s3client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// AWSEndpoint is where requests go when the configuration names no
// endpoint: AWS S3.
const AWSEndpoint = "s3.amazonaws.com"

// Config says which bucket to talk to and how.
type Config struct {
	Bucket string
	// Endpoint is a custom store's host[:port], addressed path-style
	// (http(s)://host:port/bucket/key); "" means AWS S3.
	Endpoint string
	// Region is the bucket's region; "" means ask the store once.
	Region string
	// Insecure talks plain HTTP instead of HTTPS.
	Insecure bool
	// AccessKey, SecretKey and SessionToken, when AccessKey is set, are
	// the credentials; otherwise they are found as the AWS tools find
	// them (see credentials.go).
	AccessKey, SecretKey, SessionToken string
	// AnswerTimeout bounds how long one request waits to connect and
	// then for the store's answer to begin. The caller's context bounds
	// the whole request, body included.
	AnswerTimeout time.Duration
}

// Client makes requests to one bucket. It is safe for concurrent use.
// New reads no file and contacts nobody: the SDK's configuration (and so
// the shared config files) is loaded on the first request.
type Client struct {
	cfg      Config
	endpoint string // Config.Endpoint with the scheme's default port dropped
	http     *http.Client

	mu     sync.Mutex
	api    *s3.Client // built on first use
	region string     // the region to sign for, once known
}

// New checks cfg and returns a client for its bucket.
func New(cfg Config) (*Client, error) {
	host, err := endpointHost(cfg.scheme(), cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	if cfg.AnswerTimeout <= 0 {
		cfg.AnswerTimeout = 30 * time.Second
	}
	return &Client{cfg: cfg, endpoint: host, http: newHTTPClient(cfg.AnswerTimeout), region: cfg.Region}, nil
}

func (c Config) scheme() string {
	if c.Insecure {
		return "http"
	}
	return "https"
}

// Endpoint names the store in messages: the custom endpoint as given, or
// AWSEndpoint.
func (c *Client) Endpoint() string { return cmp.Or(c.cfg.Endpoint, AWSEndpoint) }

// endpointHost checks a custom endpoint (host or host:port) and returns
// it without the port when that is the scheme's default, as browsers and
// curl send the Host header. Empty (AWS S3) stays empty.
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

// IdleConns is how many connections to the store the client keeps open
// between requests: more than any caller has requests in flight at once
// (spool puts 32 at a time), since a request finding none idle opens a
// connection, and one finding the idle ones all kept closes its own after.
const IdleConns = 256

// newHTTPClient is an HTTP client whose waits are bounded: connecting and
// waiting for an answer to begin never take longer than answer, so that a
// store that accepts connections and says nothing is noticed within it.
func newHTTPClient(answer time.Duration) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			DialContext: (&net.Dialer{
				Timeout:   answer,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			MaxIdleConns:          IdleConns,
			MaxIdleConnsPerHost:   IdleConns,
			IdleConnTimeout:       time.Minute,
			TLSHandshakeTimeout:   answer,
			ResponseHeaderTimeout: answer,
			ExpectContinueTimeout: min(answer, 10*time.Second),
			// Objects are compressed already; asking for gzip would
			// only make the store's Content-Length disagree with the
			// body.
			DisableCompression: true,
		},
		// A redirect is S3 naming another region: an error answer to
		// report, not to follow with a signature made for this one.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// client returns the SDK client, building it on first use: loading the
// SDK's configuration reads the shared config files.
func (c *Client) client(ctx context.Context) (*s3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.api != nil {
		return c.api, nil
	}
	awsCfg, err := c.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	if roots := caBundle(awsCfg); roots != nil {
		c.http.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	c.api = s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.AppID = "muster"
		o.HTTPClient = c.http
		o.Logger = logging.Nop{}
		// Retries are the caller's, so that it can bound them in time
		// and say how often it tried.
		o.Retryer = aws.NopRetryer{}
		// Checksums only where S3 requires them: many S3-compatible
		// stores refuse the SDK's default trailing checksums. Objects
		// are checked by Content-MD5 on upload and by the spool's own
		// signatures when read.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
		// The location alone says where the store is: a custom endpoint
		// is addressed path-style, and AWS_ENDPOINT_URL is not read.
		o.BaseEndpoint = c.baseEndpoint()
		o.UsePathStyle = c.endpoint != ""
		o.EndpointOptions.DisableHTTPS = c.cfg.Insecure
		if c.endpoint != "" {
			// FIPS and dual-stack endpoints are AWS's; a custom
			// endpoint is what it is.
			o.EndpointOptions.UseFIPSEndpoint = aws.FIPSEndpointStateUnset
			o.EndpointOptions.UseDualStackEndpoint = aws.DualStackEndpointStateUnset
		}
	})
	return c.api, nil
}

func (c *Client) baseEndpoint() *string {
	if c.endpoint == "" {
		return nil
	}
	return aws.String(c.cfg.scheme() + "://" + c.endpoint)
}

// inRegion signs a request for region.
func inRegion(region string) func(*s3.Options) {
	return func(o *s3.Options) { o.Region = region }
}

// call makes one request with the SDK client in the bucket's region. If
// the region was asked of the store and the store now names another (the
// bucket was made again elsewhere), it follows once.
func call[T any](ctx context.Context, c *Client, key string, f func(api *s3.Client, region func(*s3.Options)) (T, error)) (T, error) {
	var zero T
	api, err := c.client(ctx)
	if err != nil {
		return zero, err
	}
	region, err := c.bucketRegion(ctx, api)
	if err != nil {
		return zero, err
	}
	out, err := f(api, inRegion(region))
	if err == nil {
		return out, nil
	}
	e := answer(err, key)
	var se *Error
	if c.cfg.Region == "" && errors.As(e, &se) && se.Region != "" && se.Region != region && se.wrongRegion() {
		c.setRegion(se.Region)
		out, err = f(api, inRegion(se.Region))
		if err == nil {
			return out, nil
		}
		e = answer(err, key)
	}
	return zero, e
}

// Object is what a HEAD request tells of an object.
type Object struct {
	Size    int64
	ModTime time.Time // zero when the store sent no Last-Modified
}

// Head asks for key's size and time (HEAD).
func (c *Client) Head(ctx context.Context, key string) (Object, error) {
	return call(ctx, c, key, func(api *s3.Client, region func(*s3.Options)) (Object, error) {
		out, err := api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &c.cfg.Bucket, Key: &key}, region)
		if err != nil {
			return Object{}, err
		}
		return Object{Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
	})
}

// TooLargeError is an object larger than Get accepts.
type TooLargeError struct{ Size int64 }

func (e *TooLargeError) Error() string { return fmt.Sprintf("object of %d bytes", e.Size) }

// errShortBody is a body that ended before its Content-Length: the
// connection broke, so the GET is worth trying again.
var errShortBody = errors.New("response body shorter than its Content-Length")

// Get reads key's bytes (GET). An object larger than max is refused with
// *TooLargeError from its Content-Length before its body is read, and the
// body is read no further than max+1 bytes whatever the store claims.
func (c *Client) Get(ctx context.Context, key string, max int64) ([]byte, error) {
	return call(ctx, c, key, func(api *s3.Client, region func(*s3.Options)) ([]byte, error) {
		out, err := api.GetObject(ctx, &s3.GetObjectInput{Bucket: &c.cfg.Bucket, Key: &key}, region)
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		size := int64(-1) // when the store does not say
		if out.ContentLength != nil {
			size = *out.ContentLength
		}
		if size > max {
			return nil, &TooLargeError{size}
		}
		b, err := io.ReadAll(io.LimitReader(out.Body, max+1))
		if err != nil {
			return nil, err
		}
		if int64(len(b)) > max {
			return nil, &TooLargeError{int64(len(b))}
		}
		if size >= 0 && int64(len(b)) != size {
			return nil, fmt.Errorf("%w (%d of %d bytes)", errShortBody, len(b), size)
		}
		return b, nil
	})
}

// ErrExists is a conditional PUT's answer when the key is taken (412
// Precondition Failed).
var ErrExists = errors.New("the key exists")

// PutIfAbsent creates key with data unless the key exists: a PUT with
// "If-None-Match: *" and the data's Content-MD5. A store that honours the
// condition answers ErrExists when the key is taken.
func (c *Client) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	sum := md5.Sum(data)
	_, err := call(ctx, c, key, func(api *s3.Client, region func(*s3.Options)) (struct{}, error) {
		_, err := api.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        &c.cfg.Bucket,
			Key:           &key,
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
			ContentMD5:    aws.String(base64.StdEncoding.EncodeToString(sum[:])),
			ContentType:   aws.String("application/octet-stream"),
			IfNoneMatch:   aws.String("*"),
		}, region)
		return struct{}{}, err
	})
	if Code(err) == "PreconditionFailed" || Status(err) == http.StatusPreconditionFailed {
		return ErrExists
	}
	return err
}

// Delete removes key (DELETE).
func (c *Client) Delete(ctx context.Context, key string) error {
	_, err := call(ctx, c, key, func(api *s3.Client, region func(*s3.Options)) (struct{}, error) {
		_, err := api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &c.cfg.Bucket, Key: &key}, region)
		return struct{}{}, err
	})
	return err
}

// MaxDeleteKeys is the most keys one DeleteMany request may name: S3's
// bound on a multi-object delete.
const MaxDeleteKeys = 1000

// KeyError is a key that a multi-object delete did not remove, with the
// store's code and message for it.
type KeyError struct {
	Key     string
	Code    string
	Message string
}

// DeleteMany removes up to MaxDeleteKeys keys with one request
// (DeleteObjects, quiet: the store answers only with the keys it could not
// remove, and a key that does not exist counts as removed). Every key not
// among the returned KeyErrors is gone. The request carries a Content-MD5
// of its body, which S3 and many compatible stores require of it and the
// SDK no longer sends by itself.
func (c *Client) DeleteMany(ctx context.Context, keys []string) ([]KeyError, error) {
	if len(keys) > MaxDeleteKeys {
		return nil, fmt.Errorf("delete of %d keys: at most %d a request", len(keys), MaxDeleteKeys)
	}
	objs := make([]types.ObjectIdentifier, len(keys))
	for i := range keys {
		objs[i].Key = &keys[i]
	}
	in := &s3.DeleteObjectsInput{Bucket: &c.cfg.Bucket, Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}}
	return call(ctx, c, "", func(api *s3.Client, region func(*s3.Options)) ([]KeyError, error) {
		out, err := api.DeleteObjects(ctx, in, region, s3.WithAPIOptions(smithyhttp.AddContentChecksumMiddleware))
		if err != nil {
			return nil, err
		}
		var failed []KeyError
		for _, e := range out.Errors {
			failed = append(failed, KeyError{Key: aws.ToString(e.Key), Code: aws.ToString(e.Code), Message: aws.ToString(e.Message)})
		}
		return failed, nil
	})
}

// ListQuery asks for one page of a listing (ListObjectsV2).
type ListQuery struct {
	Prefix string // keys starting with it
	// StartAfter, when set, leaves out the keys up to and including it:
	// a listing that starts where a caller's knowledge ends costs no
	// request for what it knows.
	StartAfter string
	Token      string // the previous page's Next, or "" for the first page
	Max        int    // keys per page
	// Delimiter, when set, rolls the keys that continue past it after
	// the prefix up into one common prefix each (Page.Prefixes).
	Delimiter string
}

// Page is one page of a listing, in the order the store sent.
type Page struct {
	Keys []Key
	// Prefixes are the common prefixes of a listing with a Delimiter.
	Prefixes []string
	// Next is the continuation token for the next page; "" when this
	// page is the last.
	Next string
}

// Key is one key of a listing, its object's size, its ETag as the store
// sent it (quotes removed): the store's tag of the object's bytes, and
// when the store recorded it.
type Key struct {
	Key     string
	Size    int64
	ETag    string
	ModTime time.Time // zero when the store sent no LastModified
}

// List asks for one page of the keys starting with q.Prefix. Keys come
// URL-encoded, so that no byte of a key can upset the XML, and are
// decoded here.
func (c *Client) List(ctx context.Context, q ListQuery) (Page, error) {
	in := &s3.ListObjectsV2Input{
		Bucket:       &c.cfg.Bucket,
		Prefix:       &q.Prefix,
		MaxKeys:      aws.Int32(int32(q.Max)),
		EncodingType: types.EncodingTypeUrl,
	}
	if q.Token != "" {
		in.ContinuationToken = &q.Token
	}
	if q.StartAfter != "" {
		in.StartAfter = &q.StartAfter
	}
	if q.Delimiter != "" {
		in.Delimiter = &q.Delimiter
	}
	out, err := call(ctx, c, "", func(api *s3.Client, region func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
		return api.ListObjectsV2(ctx, in, region)
	})
	if err != nil {
		return Page{}, err
	}
	// decode undoes the listing's URL encoding of a key or prefix.
	decode := func(what string, k *string) (string, error) {
		if out.EncodingType != types.EncodingTypeUrl {
			return aws.ToString(k), nil
		}
		d, err := url.QueryUnescape(aws.ToString(k))
		if err != nil {
			return "", fmt.Errorf("listing: %s: %w", what, err)
		}
		return d, nil
	}
	var p Page
	for _, o := range out.Contents {
		k, err := decode("key", o.Key)
		if err != nil {
			return Page{}, err
		}
		p.Keys = append(p.Keys, Key{Key: k, Size: aws.ToInt64(o.Size), ETag: strings.Trim(aws.ToString(o.ETag), `"`), ModTime: aws.ToTime(o.LastModified)})
	}
	for _, cp := range out.CommonPrefixes {
		k, err := decode("common prefix", cp.Prefix)
		if err != nil {
			return Page{}, err
		}
		p.Prefixes = append(p.Prefixes, k)
	}
	if aws.ToBool(out.IsTruncated) {
		if p.Next = aws.ToString(out.NextContinuationToken); p.Next == "" {
			return Page{}, errors.New("listing: truncated without a continuation token")
		}
	}
	return p, nil
}

// bucketRegion returns the region requests are signed for: the
// configured one, else the one the store named when asked (once).
func (c *Client) bucketRegion(ctx context.Context, api *s3.Client) (string, error) {
	c.mu.Lock()
	region := c.region
	c.mu.Unlock()
	if region != "" {
		return region, nil
	}
	region, err := askRegion(ctx, api, c.cfg.Bucket)
	if err != nil {
		return "", err
	}
	c.setRegion(region)
	return region, nil
}

func (c *Client) setRegion(region string) {
	c.mu.Lock()
	c.region = region
	c.mu.Unlock()
}

// askRegion asks the store for the bucket's region (GetBucketLocation,
// signed for us-east-1, which every store accepts for it). As the AWS
// tools do, a refusal that names a region is taken as the answer, one that
// names none as us-east-1, and so is a store that does not know the
// request: single-region stores take any region.
func askRegion(ctx context.Context, api *s3.Client, bucket string) (string, error) {
	out, err := api.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: &bucket}, inRegion("us-east-1"))
	if err != nil {
		err = answer(err, "")
		var e *Error
		if errors.As(err, &e) {
			switch e.Code {
			case "AccessDenied", "AuthorizationHeaderMalformed", "InvalidRegion", "PermanentRedirect":
				return cmp.Or(e.Region, "us-east-1"), nil
			case "NotImplemented":
				return "us-east-1", nil
			}
		}
		return "", err
	}
	switch location := strings.TrimSpace(string(out.LocationConstraint)); location {
	case "":
		return "us-east-1", nil
	case "EU":
		return "eu-west-1", nil
	default:
		return location, nil
	}
}
