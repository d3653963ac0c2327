package s3client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// Error is an answer of the store other than 2xx: its HTTP status and the
// S3 error code and message of its XML body. An answer without one (every
// HEAD, or a proxy's page) gets a code from its status.
type Error struct {
	Status  int
	Code    string
	Message string
	Region  string // the bucket's region, when the store says
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Code, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// wrongRegion reports whether e is the store saying the request was
// signed for, or sent to, the wrong region.
func (e *Error) wrongRegion() bool {
	switch e.Code {
	case "AuthorizationHeaderMalformed", "InvalidRegion", "PermanentRedirect", "IllegalLocationConstraintException":
		return true
	}
	return false
}

// answer turns what the SDK returned for a request about key ("" for the
// bucket) into an *Error when the store answered with a status other than
// 2xx; any other error (the network, the credentials, a body cut short)
// is returned as it is.
func answer(err error, key string) error {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.HTTPStatusCode()/100 == 2 || re.HTTPStatusCode() == 0 {
		return err
	}
	e := &Error{Status: re.HTTPStatusCode(), Region: re.Response.Header.Get("X-Amz-Bucket-Region")}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		e.Code, e.Message = ae.ErrorCode(), strings.TrimSpace(ae.ErrorMessage())
	}
	// The SDK names an answer without an XML body after its status
	// ("NotFound", "Forbidden"); name it as S3 would have.
	if fromStatus := strings.ReplaceAll(http.StatusText(e.Status), " ", ""); e.Code == "" || e.Code == "UnknownError" || e.Code == fromStatus {
		e.Code, e.Message = statusCode(e.Status, key), ""
	}
	// MinIO names the error of a HEAD, which has no body, in headers.
	if c := re.Response.Header.Get("X-Minio-Error-Code"); c != "" {
		e.Code = c
		if m := re.Response.Header.Get("X-Minio-Error-Desc"); m != "" {
			e.Message = strings.Trim(m, `"`)
		}
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

// Code is the S3 error code of err, if the store answered with one.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Status is the HTTP status of err, if the store answered.
func Status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Retryable reports whether trying the same request again may succeed:
// throttling, a server error other than Not Implemented, a timeout, a
// connection that broke or was refused. Credentials that could not be
// found are not: the SDK's providers retry on their own, and a missing
// source stays missing.
func Retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		switch e.Code {
		case "SlowDown", "Throttling", "ThrottlingException", "TooManyRequests",
			"RequestTimeout", "InternalError", "ServiceUnavailable",
			"ConditionalRequestConflict", "OperationAborted":
			return true
		case "NotImplemented":
			return false // the store lacks the feature; asking again will not add it
		}
		return e.Status >= 500 && e.Status != http.StatusNotImplemented || e.Status == http.StatusTooManyRequests
	}
	var ce *CredentialsError
	if errors.As(err, &ce) {
		return false
	}
	var ne net.Error
	return errors.Is(err, errShortBody) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.As(err, &ne)
}

// NoAnswer reports whether err is the store not answering in time: a
// connection, TLS handshake, answer or body that timed out, or a request
// whose context's deadline passed.
func NoAnswer(err error) bool {
	var ce *CredentialsError
	if errors.As(err, &ce) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, context.DeadlineExceeded)
}

// Describe says what went wrong in one line: the store's error code,
// status and message, or the network error without the SDK's wrapping.
func Describe(err error) string {
	var e *Error
	if errors.As(err, &e) {
		msg := strings.TrimSuffix(e.Message, ".")
		if msg != "" {
			msg = ": " + strings.ToLower(msg[:1]) + msg[1:]
		}
		return fmt.Sprintf("%s (HTTP %d)%s", e.Code, e.Status, msg)
	}
	var ce *CredentialsError
	if errors.As(err, &ce) {
		return ce.Error()
	}
	// The SDK wraps a network error as "operation error S3: GetObject,
	// https response error StatusCode: 0, ...": say what the network
	// said.
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	var so *smithy.OperationError
	if errors.As(err, &so) {
		return so.Err.Error()
	}
	return err.Error()
}
