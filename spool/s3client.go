package spool

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// s3Client makes the few requests of the S3 REST API a spool needs (HEAD,
// GET, conditional PUT and DELETE of an object, ListObjectsV2, and
// GetBucketLocation to find a bucket's region), each signed with SigV4.
// One call is one HTTP request: retries are S3.do's.
type s3Client struct {
	http   *http.Client
	scheme string // "https", or "http" when the config says Insecure
	// endpoint is the host[:port] of a custom store, addressed
	// path-style; "" means AWS S3, addressed virtual-hosted style at the
	// bucket region's host.
	endpoint string
	bucket   string
	region   string // from the configuration; "" means ask the store

	cfg       S3Config // for findCredentials
	credsOnce sync.Once
	creds     s3Credentials

	mu    sync.Mutex
	found string // the region the store named, once asked
}

// s3Request is one request: key "" addresses the bucket itself.
type s3Request struct {
	method string
	key    string
	query  url.Values
	header http.Header
	body   []byte
}

// credentials finds the credentials on first use, so that opening a spool
// reads no file.
func (c *s3Client) credentials() s3Credentials {
	c.credsOnce.Do(func() { c.creds = findCredentials(c.cfg) })
	return c.creds
}

// send makes request r. A 2xx answer is returned for the caller to read
// and close; any other answer is returned as an *s3Error, its body read
// and closed.
func (c *s3Client) send(ctx context.Context, r s3Request) (*http.Response, error) {
	region, err := c.bucketRegion(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.sendIn(ctx, region, r)
	var e *s3Error
	if c.region == "" && errors.As(err, &e) && e.region != "" && e.region != region && e.wrongRegion() {
		// The store named another region than it answered before
		// (the bucket was made again elsewhere): follow it once.
		c.setFound(e.region)
		return c.sendIn(ctx, e.region, r)
	}
	return resp, err
}

// sendIn makes request r to the bucket in region. Region "" means AWS S3's
// global endpoint, which answers GetBucketLocation for every bucket;
// requests to it are signed for us-east-1.
func (c *s3Client) sendIn(ctx context.Context, region string, r s3Request) (*http.Response, error) {
	req, err := c.newRequest(ctx, region, r)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, readS3Error(resp, r.key)
	}
	return resp, nil
}

func (c *s3Client) newRequest(ctx context.Context, region string, r s3Request) (*http.Request, error) {
	host, virtual := c.host(region)
	path := "/" + c.bucket + "/" + r.key
	if virtual {
		host, path = c.bucket+"."+host, "/"+r.key
	}
	// The escaping and order of path and query are the ones the
	// signature covers (see canonicalRequest), so send those.
	u := &url.URL{Scheme: c.scheme, Host: host, Path: path, RawPath: s3EscapePath(path), RawQuery: s3CanonicalQuery(r.query)}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for name, vals := range r.header {
		req.Header[name] = vals
	}
	if creds := c.credentials(); !creds.anonymous() {
		hash := emptySHA256
		if len(r.body) > 0 {
			sum := sha256.Sum256(r.body)
			hash = hex.EncodeToString(sum[:])
		}
		signV4(req, creds, cmp.Or(region, "us-east-1"), time.Now(), hash)
	}
	req.Header.Set("User-Agent", "muster")
	return req, nil
}

// host returns the host a request to the bucket in region goes to, and
// whether the bucket is addressed virtual-hosted style (as a subdomain).
func (c *s3Client) host(region string) (host string, virtual bool) {
	if c.endpoint != "" {
		return c.endpoint, false
	}
	// A bucket name with a dot would not match the wildcard certificate
	// of *.s3.REGION.amazonaws.com, so such a bucket goes path-style
	// over HTTPS.
	virtual = c.scheme == "http" || !strings.Contains(c.bucket, ".")
	switch {
	case region == "":
		return awsEndpoint, virtual
	case strings.HasPrefix(region, "cn-"):
		return "s3." + region + ".amazonaws.com.cn", virtual
	}
	return "s3." + region + ".amazonaws.com", virtual
}

// bucketRegion returns the region requests are signed for: the
// configured one, else the one the store named when asked (once).
func (c *s3Client) bucketRegion(ctx context.Context) (string, error) {
	if c.region != "" {
		return c.region, nil
	}
	c.mu.Lock()
	found := c.found
	c.mu.Unlock()
	if found != "" {
		return found, nil
	}
	found, err := c.askRegion(ctx)
	if err != nil {
		return "", err
	}
	c.setFound(found)
	return found, nil
}

func (c *s3Client) setFound(region string) {
	c.mu.Lock()
	c.found = region
	c.mu.Unlock()
}

// askRegion asks the store for the bucket's region (GetBucketLocation,
// signed for us-east-1, which every store accepts for it). As the AWS
// tools do, a refusal that names a region is taken as the answer, one that
// names none as us-east-1, and so is a store that does not know the
// request: single-region stores take any region.
func (c *s3Client) askRegion(ctx context.Context) (string, error) {
	resp, err := c.sendIn(ctx, "", s3Request{method: http.MethodGet, query: url.Values{"location": {""}}})
	var e *s3Error
	if errors.As(err, &e) {
		switch e.code {
		case "AccessDenied", "AuthorizationHeaderMalformed", "InvalidRegion":
			return cmp.Or(e.region, "us-east-1"), nil
		case "NotImplemented":
			return "us-east-1", nil
		}
	}
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	var location string
	if err := xml.Unmarshal(body, &location); err != nil {
		return "", fmt.Errorf("bucket location: %w", err)
	}
	switch location = strings.TrimSpace(location); location {
	case "":
		return "us-east-1", nil
	case "EU":
		return "eu-west-1", nil
	}
	return location, nil
}

// listPage is one answer of ListObjectsV2.
type listPage struct {
	IsTruncated           bool
	NextContinuationToken string
	EncodingType          string
	Contents              []struct {
		Key  string
		Size int64
	}
}

// maxListBody bounds a listing's body: 1000 keys of 1024 bytes with their
// XML take about 1.5 MB.
const maxListBody = 16 << 20

// list asks for one page of the keys starting with prefix, in key order:
// the first page after key after (none when ""), the next ones from
// token, at most max keys.
func (c *s3Client) list(ctx context.Context, prefix, after, token string, max int) (listPage, error) {
	q := url.Values{
		"list-type": {"2"},
		"prefix":    {prefix},
		"max-keys":  {fmt.Sprint(max)},
		// Keys come URL-encoded, so that no byte of a key can upset
		// the XML.
		"encoding-type": {"url"},
	}
	if after != "" {
		q.Set("start-after", after)
	}
	if token != "" {
		q.Set("continuation-token", token)
	}
	resp, err := c.send(ctx, s3Request{method: http.MethodGet, query: q})
	if err != nil {
		return listPage{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBody+1))
	if err != nil {
		return listPage{}, err
	}
	if len(body) > maxListBody {
		return listPage{}, fmt.Errorf("listing larger than %d bytes", maxListBody)
	}
	var page listPage
	if err := xml.Unmarshal(body, &page); err != nil {
		return listPage{}, fmt.Errorf("listing: %w", err)
	}
	if page.EncodingType == "url" {
		for i := range page.Contents {
			if page.Contents[i].Key, err = url.QueryUnescape(page.Contents[i].Key); err != nil {
				return listPage{}, fmt.Errorf("listing: key: %w", err)
			}
		}
	}
	if page.IsTruncated && page.NextContinuationToken == "" {
		return listPage{}, errors.New("listing: truncated without a continuation token")
	}
	return page, nil
}

// s3Error is an answer of the store other than 2xx: its HTTP status and
// the S3 error code and message from its XML body. An answer without one
// (every HEAD, or a proxy's page) gets a code from its status.
type s3Error struct {
	status  int
	code    string
	message string
	region  string // the bucket's region, when the store says
}

func (e *s3Error) Error() string {
	if e.message == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.code, e.status)
	}
	return fmt.Sprintf("%s (HTTP %d): %s", e.code, e.status, e.message)
}

// wrongRegion reports whether e is the store saying the request was
// signed for, or sent to, the wrong region.
func (e *s3Error) wrongRegion() bool {
	switch e.code {
	case "AuthorizationHeaderMalformed", "InvalidRegion", "PermanentRedirect", "IllegalLocationConstraintException":
		return true
	}
	return false
}

// readS3Error turns a non-2xx answer to a request for key into an
// *s3Error, reading no more than 64 KiB of its body. A body cut short
// still leaves the status to go by.
func readS3Error(resp *http.Response, key string) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &s3Error{status: resp.StatusCode}
	var x struct{ Code, Message, Region string }
	if xml.Unmarshal(body, &x) == nil && x.Code != "" {
		e.code, e.message, e.region = x.Code, strings.TrimSpace(x.Message), strings.TrimSpace(x.Region)
	} else {
		e.code = statusCode(resp.StatusCode, key)
		// A proxy's plain-text complaint says more than its status;
		// an HTML page does not.
		if line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n"); line != "" && line[0] != '<' {
			e.message = strings.TrimSpace(line[:min(len(line), 200)])
		}
	}
	// MinIO names the error of a HEAD, which has no body, in headers.
	if c := resp.Header.Get("X-Minio-Error-Code"); c != "" {
		e.code = c
		if m := resp.Header.Get("X-Minio-Error-Desc"); m != "" {
			e.message = strings.Trim(m, `"`)
		}
	}
	if e.region == "" {
		e.region = resp.Header.Get("X-Amz-Bucket-Region")
	}
	return e
}

// statusCode names the S3 error an answer without a body means: S3's
// codes for the statuses HEAD requests meet, else the status text.
func statusCode(status int, key string) string {
	switch status {
	case http.StatusNotFound:
		if key == "" {
			return "NoSuchBucket"
		}
		return "NoSuchKey"
	case http.StatusForbidden:
		return "AccessDenied"
	case http.StatusConflict:
		return "Conflict"
	case http.StatusPreconditionFailed:
		return "PreconditionFailed"
	}
	if text := http.StatusText(status); text != "" {
		return strings.ReplaceAll(text, " ", "")
	}
	return fmt.Sprintf("HTTP%d", status)
}
