package spool

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Signing S3 requests with AWS Signature Version 4, as the S3 API
// reference specifies it ("Authenticating Requests: Using the
// Authorization Header"): a canonical form of the request is hashed and
// signed with a key derived from the secret, the day, the region and the
// service, and the signature travels in the Authorization header.

const (
	sigV4Algorithm = "AWS4-HMAC-SHA256"
	amzDateFormat  = "20060102T150405Z"
	// emptySHA256 is the SHA-256 of no bytes, the payload hash of every
	// request without a body.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// signV4 signs req for S3 in region at time t. payloadHash is the hex
// SHA-256 of the body; it is sent as x-amz-content-sha256, so the store
// checks the body against the signature. Host and every header set on req
// before the call are signed, except User-Agent: set the headers first.
func signV4(req *http.Request, creds s3Credentials, region string, t time.Time, payloadHash string) {
	t = t.UTC()
	stamp := t.Format(amzDateFormat)
	req.Header.Set("X-Amz-Date", stamp)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	if creds.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", creds.SessionToken)
	}
	canonical, signed := canonicalRequest(req, payloadHash)
	day := stamp[:8]
	scope := day + "/" + region + "/s3/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := sigV4Algorithm + "\n" + stamp + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+creds.SecretKey), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	req.Header.Set("Authorization", sigV4Algorithm+" Credential="+creds.AccessKey+"/"+scope+
		",SignedHeaders="+signed+",Signature="+hex.EncodeToString(hmacSHA256(key, toSign)))
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// canonicalRequest returns the canonical form of req that SigV4 hashes,
// and the list of signed header names.
//
// S3 differs from other AWS services in two ways: the path is not
// normalised ("a//b" and "a/./b" are keys of their own), and it is encoded
// once, not twice. The URI and the query are encoded from their decoded
// values, so the result does not depend on how req.URL happens to escape
// them; the client sends exactly these encodings (s3Client.newRequest).
func canonicalRequest(req *http.Request, payloadHash string) (canonical, signed string) {
	var b strings.Builder
	b.WriteString(req.Method)
	b.WriteByte('\n')
	b.WriteString(cmp.Or(s3EscapePath(req.URL.Path), "/"))
	b.WriteByte('\n')
	b.WriteString(s3CanonicalQuery(req.URL.Query()))
	b.WriteByte('\n')

	headers := map[string]string{"host": cmp.Or(req.Host, req.URL.Host)}
	for name, vals := range req.Header {
		name = strings.ToLower(name)
		if name == "authorization" || name == "user-agent" {
			continue
		}
		trimmed := make([]string, len(vals))
		for i, v := range vals {
			// Trimmed, with runs of spaces inside made one.
			trimmed[i] = strings.Join(strings.Fields(v), " ")
		}
		headers[name] = strings.Join(trimmed, ",")
	}
	names := make([]string, 0, len(headers))
	for name := range headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(headers[name])
		b.WriteByte('\n')
	}
	signed = strings.Join(names, ";")
	b.WriteByte('\n')
	b.WriteString(signed)
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String(), signed
}

// s3CanonicalQuery encodes query parameters as SigV4 wants them, which is
// also how the client sends them: sorted by name (then value), names and
// values URI-encoded, "/" included, and "name=" for a parameter without a
// value.
func s3CanonicalQuery(q map[string][]string) string {
	type pair struct{ k, v string }
	var pairs []pair
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, pair{s3Escape(k, false), s3Escape(v, false)})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(strings.Compare(a.k, b.k), strings.Compare(a.v, b.v))
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// s3EscapePath URI-encodes a path as S3 wants it: every byte but the
// unreserved characters (A-Z a-z 0-9 - . _ ~) and "/" as %XX, upper-case
// hex.
func s3EscapePath(p string) string { return s3Escape(p, true) }

func s3Escape(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(s); i++ {
		if !s3Unreserved(s[i], keepSlash) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if s3Unreserved(c, keepSlash) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
	}
	return string(b)
}

func s3Unreserved(c byte, keepSlash bool) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || keepSlash && c == '/'
}
